// fp32 -> bfloat16 rounding for the bf16 compute path (base/precision.h): round to nearest, ties to even, NaN
// kept a (quiet) NaN; branch-free so the loops vectorize. to_bf16_rows keeps the caller's layout: `rows` runs of
// `cols` values `ld` apart become dense runs of `cols` (the GEMM then reads them with leading dimension cols).
#pragma once
#include <cstdint>
#include <cstring>

namespace dd::ops {

inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

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
