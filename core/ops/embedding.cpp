// Embedding lookup (row gather) and its backward (row scatter-add). ops.h passes no vocabulary size, so only
// negative indices can be caught here; the data layer must check the upper bound.
#include <cstring>
#include <string>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    if (idx[n] < 0)
      throw UsageError("embedding index " + std::to_string(idx[n]) + " at position " + std::to_string(n) +
                       " is negative");
    std::memcpy(y + n * C, W + static_cast<int64_t>(idx[n]) * C, sizeof(float) * C);
  }
}

void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    float* wr = dW + static_cast<int64_t>(idx[n]) * C;
    const float* dr = dy + n * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) wr[i] += dr[i];
  }
}

}  // namespace dd::ops
