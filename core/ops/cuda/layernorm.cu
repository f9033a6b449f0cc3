// LayerNorm over the last dim: one block per row for the forward and for dx; dw/db are column sums over rows
// (deterministic, no atomics: col_reduce.cuh).
#include "core/ops/cuda/col_reduce.cuh"
#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
using detail::block_sum;
constexpr int kLnThreads = 128;

__global__ void ln_fwd_k(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t C,
                         float eps) {
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  float* yr = y + n * C;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += xr[i];
  const float m = block_sum(s) / float(C);
  float v = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float d = xr[i] - m;
    v += d * d;
  }
  const float r = 1.f / sqrtf(block_sum(v) / float(C) + eps);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) yr[i] = (xr[i] - m) * r * w[i] + b[i];
  if (threadIdx.x == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

__global__ void ln_bwd_dx_k(float* dx, const float* dy, const float* x, const float* w, const float* mean,
                            const float* rstd, int64_t C) {
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  const float* dr = dy + n * C;
  const float m = mean[n], r = rstd[n];
  float sdn = 0.f, sdnx = 0.f;  // sum(w*dy), sum(w*dy*xhat)
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float dn = w[i] * dr[i];
    sdn += dn;
    sdnx += dn * ((xr[i] - m) * r);
  }
  const float a = block_sum(sdn) / float(C), bq = block_sum(sdnx) / float(C);
  float* o = dx + n * C;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float xh = (xr[i] - m) * r;
    o[i] = (w[i] * dr[i] - a - xh * bq) * r;
  }
}

// Row n, column c of the LayerNorm weight and bias gradients: dy * x_hat and dy.
struct LnParamGrad {
  const float *dy, *x, *mean, *rstd;
  int64_t C;
  __device__ float2 operator()(int64_t n, int64_t c) const {
    const float d = dy[n * C + c];
    return make_float2(d * ((x[n * C + c] - mean[n]) * rstd[n]), d);
  }
};
}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                       int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  ln_fwd_k<<<detail::to_int(N, "N"), kLnThreads, 0, stream()>>>(y, mean, rstd, x, w, b, C, eps);
  DD_CUDA_LAUNCH_CHECK();
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (dx) {
    ln_bwd_dx_k<<<detail::to_int(N, "N"), kLnThreads, 0, stream()>>>(dx, dy, x, w, mean, rstd, C);
    DD_CUDA_LAUNCH_CHECK();
  }
  detail::column_sums(dw, db, N, C, LnParamGrad{dy, x, mean, rstd, C});
}

}  // namespace dd::cuops
