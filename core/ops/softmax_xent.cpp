// Softmax + cross-entropy (mean over rows), computed through log-sum-exp for stability.
#include <cmath>
#include <string>

#include "base/error.h"
#include "core/ops/ops.h"
#include "core/ops/vecmath.h"

namespace dd::ops {

float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                           int64_t* correct) {
  double loss = 0;
  int64_t hits = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int32_t tg = targets[n];
    if (tg < 0 || tg >= V)
      throw UsageError("target " + std::to_string(tg) + " at row " + std::to_string(n) + " outside [0, " +
                       std::to_string(V) + ")");
    const float* l = logits + n * V;
    float* p = probs + n * V;
    float m = l[0];
    int64_t am = 0;
    for (int64_t j = 1; j < V; ++j)
      if (l[j] > m) m = l[j], am = j;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < V; ++j) {
      p[j] = vm::exp(l[j] - m);
      s += p[j];
    }
    const float inv = 1.f / s;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) p[j] *= inv;
    loss += std::log(static_cast<double>(s)) + m - l[tg];
    hits += am == tg;
  }
  if (correct) *correct = hits;
  return static_cast<float>(loss / N);
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                           float scale) {
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * V;
    float* d = dlogits + n * V;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) d[j] = p[j] * scale;
    d[targets[n]] -= scale;
  }
}

}  // namespace dd::ops
