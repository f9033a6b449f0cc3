// Causal multi-head self-attention: cuBLAS strided-batched GEMMs for Q K^T, att @ V and their backward (one call
// per head, batched over the batch dimension, whose strides are uniform), plus own causal row-softmax kernels
// (one block per row of att).
#include <cmath>

#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
using detail::block_max;
using detail::block_sum;
constexpr int kRowThreads = 128;

// Row t of a T x T score matrix (rows = B*NH*T in total): softmax over columns 0..t in place, zeros after.
__global__ void causal_softmax_k(float* att, int64_t T) {
  const int64_t row = blockIdx.x, t = row % T;
  float* r = att + row * T;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_max(m);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x) {
    const float e = expf(r[j] - m);
    r[j] = e;
    s += e;
  }
  const float inv = 1.f / block_sum(s);
  for (int64_t j = threadIdx.x; j < T; j += blockDim.x) r[j] = j <= t ? r[j] * inv : 0.f;
}

// Softmax backward in place on d(att): d(pre) = att * (d(att) - sum(att * d(att))), zero outside the prefix.
__global__ void causal_softmax_bwd_k(float* da, const float* att, int64_t T) {
  const int64_t row = blockIdx.x, t = row % T;
  const float* ar = att + row * T;
  float* dr = da + row * T;
  float dot = 0.f;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x) dot += ar[j] * dr[j];
  dot = block_sum(dot);
  for (int64_t j = threadIdx.x; j < T; j += blockDim.x) dr[j] = j <= t ? ar[j] * (dr[j] - dot) : 0.f;
}
}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  if (B <= 0 || T <= 0) return;
  const int64_t hd = C / NH, C3 = 3 * C, TT = T * T;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  // Head h of batch b: q at qkv + b*T*C3 + h*hd (row stride C3), scores at att + (b*NH + h)*TT.
  for (int64_t h = 0; h < NH; ++h) {
    const float* q = qkv + h * hd;
    gemm_strided_batched(false, true, T, T, hd, scale, q, C3, T * C3, q + C, C3, T * C3, 0.f, att + h * TT, T, NH * TT,
                         B);
  }
  causal_softmax_k<<<detail::to_int(B * NH * T, "B*NH*T"), kRowThreads, 0, stream()>>>(att, T);
  DD_CUDA_LAUNCH_CHECK();
  for (int64_t h = 0; h < NH; ++h) {
    const float* v = qkv + 2 * C + h * hd;
    gemm_strided_batched(false, false, T, hd, T, 1.f, att + h * TT, T, NH * TT, v, C3, T * C3, 0.f, out + h * hd, C,
                         T * C, B);
  }
}

int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH) {
  (void)C;
  return B * NH * T * T;  // d(att), one T x T block per (batch, head), as the CPU contract
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH) {
  if (B <= 0 || T <= 0) return;
  const int64_t hd = C / NH, C3 = 3 * C, TT = T * T;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  for (int64_t h = 0; h < NH; ++h) {
    const float* v = qkv + 2 * C + h * hd;
    const float* dO = dout + h * hd;
    const float* a = att + h * TT;
    float* da = scratch + h * TT;
    float* dv = dqkv + 2 * C + h * hd;
    // d(att) = dout @ V^T ; dV = att^T @ dout
    gemm_strided_batched(false, true, T, T, hd, 1.f, dO, C, T * C, v, C3, T * C3, 0.f, da, T, NH * TT, B);
    gemm_strided_batched(true, false, T, hd, T, 1.f, a, T, NH * TT, dO, C, T * C, 0.f, dv, C3, T * C3, B);
  }
  causal_softmax_bwd_k<<<detail::to_int(B * NH * T, "B*NH*T"), kRowThreads, 0, stream()>>>(scratch, att, T);
  DD_CUDA_LAUNCH_CHECK();
  for (int64_t h = 0; h < NH; ++h) {
    const float* q = qkv + h * hd;
    const float* k = q + C;
    const float* da = scratch + h * TT;
    float* dq = dqkv + h * hd;
    float* dk = dq + C;
    // dQ = d(pre) @ K * scale ; dK = d(pre)^T @ Q * scale
    gemm_strided_batched(false, false, T, hd, T, scale, da, T, NH * TT, k, C3, T * C3, 0.f, dq, C3, T * C3, B);
    gemm_strided_batched(true, false, T, hd, T, scale, da, T, NH * TT, q, C3, T * C3, 0.f, dk, C3, T * C3, B);
  }
}

}  // namespace dd::cuops
