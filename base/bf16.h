// fp32 <-> bfloat16 bits: round to nearest, ties to even, a NaN kept a (quiet) NaN; branch-free so loops over it
// vectorize. One rounding for the bf16 compute path (core/ops/bf16.h) and the compress=bf16 codec
// (core/sync/merge/codec.cpp).
#pragma once
#include <cstdint>
#include <cstring>

namespace dd {

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

}  // namespace dd
