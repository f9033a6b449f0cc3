// Shared by the sync unit tests: n values uniform in [-scale, scale) from a seeded stream.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor/rng.h"

inline std::vector<float> random_values(size_t n, uint64_t seed, float scale) {
  dd::Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (2 * r.uniform() - 1);
  return v;
}
