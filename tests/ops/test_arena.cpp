// The arena kernels of the host entry set (host_device(): all_finite, dot3, sub, add_diff, outer_nesterov)
// against plain loops written here. Each kernel is the same arithmetic in the same order as its loop, compiled
// with the same flags, so the comparisons are bitwise.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/ops/device.h"
#include "tests/common/same_bits.h"

namespace {

using dd::testing_common::bits;
using dd::testing_common::same_bits;

constexpr int64_t kSizes[] = {0, 1, 1000, (int64_t(1) << 20) + 7};

std::vector<float> uniform(int64_t n, unsigned seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// One element past n, a sentinel the kernels must neither read (NaN for all_finite, 1e30 for dot3) nor write.
std::vector<float> with_sentinel(std::vector<float> v, float sentinel) {
  v.push_back(sentinel);
  return v;
}



TEST(Arena, Dot3IsTheIndexOrderDoubleSum) {
  dd::ops::Device& dev = dd::ops::host_device();
  for (int64_t n : kSizes) {
    const auto a0 = uniform(n, 1, -2.f, 2.f), b0 = uniform(n, 2, -2.f, 2.f);
    const auto a = with_sentinel(a0, 1e30f), b = with_sentinel(b0, 1e30f);
    double aa = 0, bb = 0, ab = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = a[size_t(i)], y = b[size_t(i)];
      aa += x * x;
      bb += y * y;
      ab += x * y;
    }
    double out[3] = {-1, -1, -1};
    dev.dot3(a.data(), b.data(), n, out);
    EXPECT_EQ(bits(out[0]), bits(aa)) << "n=" << n << ": " << out[0] << " vs " << aa;
    EXPECT_EQ(bits(out[1]), bits(bb)) << "n=" << n << ": " << out[1] << " vs " << bb;
    EXPECT_EQ(bits(out[2]), bits(ab)) << "n=" << n << ": " << out[2] << " vs " << ab;
  }
}

TEST(Arena, SubAndAddDiffAreExact) {
  dd::ops::Device& dev = dd::ops::host_device();
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto a = with_sentinel(uniform(n, 3, -4.f, 4.f), 5.f), b = with_sentinel(uniform(n, 4, -4.f, 4.f), 6.f),
               y0 = with_sentinel(uniform(n, 5, -1.f, 1.f), 7.f);
    auto ref = y0;
    for (int64_t i = 0; i < n; ++i) ref[size_t(i)] = a[size_t(i)] - b[size_t(i)];
    auto y = y0;
    dev.sub(y.data(), a.data(), b.data(), n);
    EXPECT_TRUE(same_bits(y, ref)) << "sub";
    auto ya = a;  // y aliasing a
    dev.sub(ya.data(), ya.data(), b.data(), n);
    ref.back() = a.back();
    EXPECT_TRUE(same_bits(ya, ref)) << "sub, y = a";

    for (int64_t i = 0; i < n; ++i) ref[size_t(i)] = y0[size_t(i)] + (a[size_t(i)] - b[size_t(i)]);
    ref.back() = y0.back();
    y = y0;
    dev.add_diff(y.data(), a.data(), b.data(), n);
    EXPECT_TRUE(same_bits(y, ref)) << "add_diff";
  }
}

// The formula of ops.h, written out (this translation unit has the kernels' compiler flags, so the compiler
// contracts it as it contracts core/ops/arena.cpp).
void outer_nesterov_formula(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = anchor[i] - avg[i];
    mom[i] = mu * mom[i] + g;
    anchor[i] -= lr * (g + mu * mom[i]);
  }
}

TEST(Arena, OuterNesterovIsTheFormula) {
  dd::ops::Device& dev = dd::ops::host_device();
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto anchor0 = with_sentinel(uniform(n, 6, -2.f, 2.f), 3.f),
               avg = with_sentinel(uniform(n, 7, -2.f, 2.f), 4.f),
               mom0 = with_sentinel(uniform(n, 8, -0.5f, 0.5f), 5.f);
    auto anchor = anchor0, mom = mom0, ref_anchor = anchor0, ref_mom = mom0;
    // Two steps: the second starts from a non-trivial momentum written by the first.
    for (int step = 0; step < 2; ++step) {
      dev.outer_nesterov(anchor.data(), mom.data(), avg.data(), n, 0.7f, 0.9f);
      outer_nesterov_formula(ref_anchor.data(), ref_mom.data(), avg.data(), n, 0.7f, 0.9f);
      EXPECT_TRUE(same_bits(mom, ref_mom)) << "mom, step " << step;
      EXPECT_TRUE(same_bits(anchor, ref_anchor)) << "anchor, step " << step;
    }
  }
}

TEST(Arena, AllFiniteFindsNanAndInfAnywhere) {
  dd::ops::Device& dev = dd::ops::host_device();
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = with_sentinel(uniform(n, 9, -3.f, 3.f), std::numeric_limits<float>::quiet_NaN());
    // Finite extremes pass: the largest float, a subnormal, negative zero.
    if (n >= 1000) x[1] = FLT_MAX, x[2] = -FLT_MAX, x[3] = FLT_MIN / 4, x[4] = -0.f;
    EXPECT_TRUE(dev.all_finite(x.data(), n));
    if (n == 0) continue;
    // First, middle, last; and both sides of the kernel's 4096-element chunk boundary.
    for (int64_t pos : {int64_t(0), n / 2, n - 1, int64_t(4095), int64_t(4096)}) {
      if (pos >= n) continue;
      for (float v : bad_values) {
        auto y = x;
        y[size_t(pos)] = v;
        EXPECT_FALSE(dev.all_finite(y.data(), n)) << "value " << v << " at " << pos;
      }
    }
  }
}

}  // namespace
