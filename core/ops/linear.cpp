// Fully connected layer: forward is one GEMM with the bias (and optionally ReLU) fused; backward is two GEMMs,
// the weight gradient accumulated straight into the gradient arena (beta = 1), plus a vectorized bias sum.
#include "core/ops/ops.h"

namespace dd::ops {

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out,
                    bool relu) {
  matmul(false, true, N, out, in, 1.f, x, in, W, in, 0.f, y, out, b, relu);
}

void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                     int64_t in, int64_t out) {
  if (dx) gemm(false, false, N, in, out, 1.f, dy, out, W, in, 0.f, dx, in);
  if (dW) gemm(true, false, out, in, N, 1.f, dy, out, x, in, 1.f, dW, in);
  if (db) {
    for (int64_t n = 0; n < N; ++n) {
      const float* __restrict r = dy + n * out;
      float* __restrict d = db;
#pragma omp simd
      for (int64_t o = 0; o < out; ++o) d[o] += r[o];
    }
  }
}

}  // namespace dd::ops
