// Llama decoder kernels on the device (same semantics as core/ops/llm.cpp): RMSNorm (one block per row; dw as
// deterministic column sums, col_reduce.cuh), RoPE in place (one thread per rotated pair, angles in
// double as on the host), SwiGLU (grid-stride, one thread per output).
#include "core/ops/cuda/col_reduce.cuh"
#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
using detail::block_sum;
constexpr int kRmsThreads = 128;

__global__ void rms_fwd_k(float* y, float* rstd, const float* x, const float* w, int64_t C, float eps) {
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  float* yr = y + n * C;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += xr[i] * xr[i];
  const float r = 1.f / sqrtf(block_sum(s) / float(C) + eps);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) yr[i] = xr[i] * r * w[i];
  if (threadIdx.x == 0) rstd[n] = r;
}

__global__ void rms_bwd_dx_k(float* dx, const float* dy, const float* x, const float* w, const float* rstd,
                             int64_t C) {
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  const float* dr = dy + n * C;
  const float r = rstd[n];
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += dr[i] * w[i] * xr[i];
  const float k = block_sum(s) * r * r * r / float(C);
  float* o = dx + n * C;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) o[i] = r * w[i] * dr[i] - xr[i] * k;
}

// Row n, column c of the RMSNorm weight gradient: dy * x * rstd.
struct RmsWeightGrad {
  const float *dy, *x, *rstd;
  int64_t C;
  __device__ float2 operator()(int64_t n, int64_t c) const {
    return make_float2(dy[n * C + c] * x[n * C + c] * rstd[n], 0.f);
  }
};

// One thread per pair: rows r < B*T, heads h < NH, pairs i < hd/2.
__global__ void rope_k(float* x, int64_t rows, int64_t T, int64_t NH, int64_t hd, int64_t ld, double base,
                       double sign) {
  const int64_t half = hd / 2, per_row = NH * half, total = rows * per_row;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / per_row, h = (e % per_row) / half, i = e % half;
    const double ang = double(r % T) * pow(base, -2.0 * double(i) / double(hd));
    const float c = float(cos(ang)), s = float(sign) * float(sin(ang));
    float* p = x + r * ld + h * hd + 2 * i;
    const float a = p[0], b = p[1];
    p[0] = a * c - b * s;
    p[1] = a * s + b * c;
  }
}

__global__ void swiglu_fwd_k(float* y, const float* gu, int64_t N, int64_t F) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < N * F; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e / F, i = e % F;
    const float g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i];
    y[e] = g / (1.f + expf(-g)) * u;
  }
}

__global__ void swiglu_bwd_k(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < N * F; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e / F, i = e % F;
    const float g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i], d = dy[e];  // loaded first: dgu may alias gu
    const float s = 1.f / (1.f + expf(-g));
    dgu[n * 2 * F + i] = d * u * s * (1.f + g * (1.f - s));
    dgu[n * 2 * F + F + i] = d * g * s;
  }
}
}  // namespace

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  rms_fwd_k<<<detail::to_int(N, "N"), kRmsThreads, 0, stream()>>>(y, rstd, x, w, C, eps);
  DD_CUDA_LAUNCH_CHECK();
}

void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (dx) {
    rms_bwd_dx_k<<<detail::to_int(N, "N"), kRmsThreads, 0, stream()>>>(dx, dy, x, w, rstd, C);
    DD_CUDA_LAUNCH_CHECK();
  }
  if (dw) detail::column_sums(dw, nullptr, N, C, RmsWeightGrad{dy, x, rstd, C});
}

void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base) {
  if (B * T * NH * hd <= 0) return;
  rope_k<<<detail::blocks_for(B * T * NH * (hd / 2)), detail::kThreads, 0, stream()>>>(x, B * T, T, NH, hd, ld,
                                                                                       double(base), 1.0);
  DD_CUDA_LAUNCH_CHECK();
}

void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base) {
  if (B * T * NH * hd <= 0) return;
  rope_k<<<detail::blocks_for(B * T * NH * (hd / 2)), detail::kThreads, 0, stream()>>>(dx, B * T, T, NH, hd, ld,
                                                                                       double(base), -1.0);
  DD_CUDA_LAUNCH_CHECK();
}

void swiglu_forward(float* y, const float* gu, int64_t N, int64_t F) {
  if (N * F <= 0) return;
  swiglu_fwd_k<<<detail::blocks_for(N * F), detail::kThreads, 0, stream()>>>(y, gu, N, F);
  DD_CUDA_LAUNCH_CHECK();
}

void swiglu_backward(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F) {
  if (N * F <= 0) return;
  swiglu_bwd_k<<<detail::blocks_for(N * F), detail::kThreads, 0, stream()>>>(dgu, dy, gu, N, F);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
