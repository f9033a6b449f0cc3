// fp32 -> bfloat16 rows for the bf16 compute path (base/precision.h), with the rounding of base/bf16.h.
// to_bf16_rows keeps the caller's layout: `rows` runs of `cols` values `ld` apart become dense runs of `cols` (the
// GEMM then reads them with leading dimension cols).
#pragma once
#include <cstdint>

#include "base/bf16.h"

namespace dd::ops {

using dd::bf16_bits;
using dd::bf16_value;

inline void to_bf16_rows(uint16_t* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = in + r * ld;
    uint16_t* d = out + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) d[c] = bf16_bits(s[c]);
  }
}

// The same values widened back to fp32 (the path for shapes without a bf16 kernel: bf16 inputs, fp32 GEMM).
inline void round_bf16_rows(float* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = in + r * ld;
    float* d = out + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) d[c] = bf16_value(bf16_bits(s[c]));
  }
}

}  // namespace dd::ops
