// Pointwise ops (ReLU, exact-erf GELU, add); plain loops the compiler vectorizes, threaded when large.
#include "core/ops/ops.h"
#include "core/ops/vecmath.h"

namespace dd::ops {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 16;
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

void relu_forward(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void relu_backward(float* dx, const float* dy, const float* y, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

void gelu_forward(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = 0.5f * v * (1.f + vm::erf(v * kInvSqrt2));
  }
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float cdf = 0.5f * (1.f + vm::erf(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * vm::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

void add(float* y, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_inplace(float* y, const float* a, int64_t n) {
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += a[i];
}

}  // namespace dd::ops
