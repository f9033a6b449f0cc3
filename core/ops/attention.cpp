// Causal multi-head self-attention: per (batch, head) sgemms for Q K^T and att @ V (and their backward), with
// a row softmax restricted to the causal prefix. (batch, head) pairs run in parallel; oneDNN's sgemm runs
// single-threaded inside a parallel region, so there is no oversubscription.
#include <cmath>

#include "core/ops/ops.h"
#include "core/ops/vecmath.h"

namespace dd::ops {

namespace {
// Parallel regions cost microseconds (far more when cores are oversubscribed); only worth it for real sizes.
bool att_parallel(int64_t B, int64_t T, int64_t C, int64_t NH) { return B * NH > 1 && B * T * T * C >= (1 << 16); }
}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t hd = C / NH, C3 = 3 * C;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel for schedule(static) if (att_parallel(B, T, C, NH))
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * C3 + h * hd;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* a = att + bh * T * T;
    // Full T x T scores (the masked half is wasted flops, but one big gemm beats T small ones).
    gemm(false, true, T, T, hd, scale, q, C3, k, C3, 0.f, a, T);
    for (int64_t t = 0; t < T; ++t) {
      float* r = a + t * T;
      float m = r[0];
      for (int64_t j = 1; j <= t; ++j) m = r[j] > m ? r[j] : m;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j <= t; ++j) {
        r[j] = vm::exp(r[j] - m);
        s += r[j];
      }
      const float inv = 1.f / s;
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) r[j] *= inv;
      for (int64_t j = t + 1; j < T; ++j) r[j] = 0.f;
    }
    gemm(false, false, T, hd, T, 1.f, a, T, v, C3, 0.f, out + b * T * C + h * hd, C);
  }
}

int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH) {
  (void)C;
  return B * NH * T * T;  // one T x T d(att) buffer per (batch, head) so they can run concurrently
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t hd = C / NH, C3 = 3 * C;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel for schedule(static) if (att_parallel(B, T, C, NH))
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * C3 + h * hd;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + b * T * C3 + h * hd;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* a = att + bh * T * T;
    const float* dO = dout + b * T * C + h * hd;
    float* da = scratch + bh * T * T;
    gemm(false, true, T, T, hd, 1.f, dO, C, v, C3, 0.f, da, T);  // d(att) = dout @ V^T
    gemm(true, false, T, hd, T, 1.f, a, T, dO, C, 0.f, dv, C3);  // dV = att^T @ dout
    // Softmax backward in place: d(pre) = att * (d(att) - sum(att * d(att))); zero outside the causal prefix.
    for (int64_t t = 0; t < T; ++t) {
      const float* ar = a + t * T;
      float* dr = da + t * T;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j <= t; ++j) dot += ar[j] * dr[j];
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) dr[j] = ar[j] * (dr[j] - dot);
      for (int64_t j = t + 1; j < T; ++j) dr[j] = 0.f;
    }
    gemm(false, false, T, hd, T, scale, da, T, k, C3, 0.f, dq, C3);  // dQ = d(pre) @ K * scale
    gemm(true, false, T, hd, T, scale, da, T, q, C3, 0.f, dk, C3);   // dK = d(pre)^T @ Q * scale
  }
}

}  // namespace dd::ops
