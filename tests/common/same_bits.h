// Bitwise comparisons for the kernel tests (host and GPU alike): the bits of a double, and the equality of two
// float arrays bit for bit (so -0 != +0 and NaN payloads count), naming how many elements differ and the first.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace dd::testing_common {

inline uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

inline ::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << ref.size();
  if (ref.empty() || std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0)
    return ::testing::AssertionSuccess();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::memcmp(&got[i], &ref[i], sizeof(float)) != 0 && !bad++) first = i;
  return ::testing::AssertionFailure() << bad << " of " << ref.size() << " elements differ; first at " << first
                                       << ": got " << got[first] << " want " << ref[first];
}

}  // namespace dd::testing_common
