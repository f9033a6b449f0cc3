// What the bf16 tests share (test_bf16.cpp, test_bf16_attention.cpp): bf16's unit roundoff and fp32's, the
// summation bound gamma_n, the bound of one bf16 GEMM term, the largest error over a tensor as a fraction of a
// bound, normal inputs, and a fixture that skips on a CPU without bf16 and restores fp32 after each test.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/ops/ops.h"

namespace dd::bf16_test {

constexpr double kU = 1.0 / 256, kU32 = 1.0 / (1 << 24);
inline double gamma32(double n) { return n * kU32 / (1 - n * kU32); }
// A sum of K products of bf16-rounded inputs accumulated in fp32 (S: the sum of their magnitudes).
inline double gemm_term(double S, double K) {
  return (2 * kU + kU * kU) * S + gamma32(K + 3) * (1 + kU) * (1 + kU) * S;
}

// The largest error / bound and error / (the fp32 part of the bound) over a tensor.
struct Ratio {
  double bf16 = 0, fp32 = 0;
  void add(double got, double exact, double bound, double bound32) {
    const double e = std::fabs(got - exact);
    bf16 = std::max(bf16, bound > 0 ? e / bound : (e > 0 ? INFINITY : 0));
    fp32 = std::max(fp32, bound32 > 0 ? e / bound32 : (e > 0 ? INFINITY : 0));
  }
};

inline std::vector<float> normal(size_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

class Fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::bf16_supported()) GTEST_SKIP() << ops::bf16_refusal();
    ops::set_threads(1);
  }
  void TearDown() override { ops::set_precision(Precision::fp32); }
};

}  // namespace dd::bf16_test
