// Fully connected layer as two/three sgemms; bias handled with plain loops.
#include "core/ops/ops.h"

namespace dd::ops {

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out) {
  if (b) {
    // Pre-fill rows with the bias so the gemm can accumulate into it (beta = 1) instead of a second pass.
    for (int64_t n = 0; n < N; ++n) {
      float* yr = y + n * out;
      for (int64_t o = 0; o < out; ++o) yr[o] = b[o];
    }
  }
  gemm(false, true, N, out, in, 1.f, x, in, W, in, b ? 1.f : 0.f, y, out);
}

void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                     int64_t in, int64_t out) {
  if (dx) gemm(false, false, N, in, out, 1.f, dy, out, W, in, 0.f, dx, in);
  if (dW) gemm(true, false, out, in, N, 1.f, dy, out, x, in, 1.f, dW, in);
  if (db) {
    for (int64_t n = 0; n < N; ++n) {
      const float* r = dy + n * out;
      for (int64_t o = 0; o < out; ++o) db[o] += r[o];
    }
  }
}

}  // namespace dd::ops
