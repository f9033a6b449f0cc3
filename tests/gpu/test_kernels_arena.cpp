// The arena kernels of dd::cuops (all_finite, dot3, sub, add_diff, outer_nesterov) against the CPU dd::ops kernels
// (label gpu; skipped without a CUDA device), on sizes 0, 1, 1000 and 2^20 + 7, with the tolerance each
// computation allows: the two summation orders' bound for dot3, exact for all_finite, sub and add_diff, and the
// rounding bound of the fused or unfused update for outer_nesterov.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/ops/cuda/device_cuda.h"
#include "core/ops/ops.h"
#include "tests/common/same_bits.h"
#include "tests/gpu/test_kernels_util.h"

namespace dd::cuops::testing {
namespace {

using dd::testing_common::bits;
using dd::testing_common::same_bits;

constexpr int64_t kSizes[] = {0, 1, 1000, (int64_t(1) << 20) + 7};



// Every array holds one element past n, a sentinel the kernels must neither read nor write (NaN for all_finite,
// 1e30 for dot3; elementwise outputs are compared in full, the host's sentinel being untouched). It also keeps
// the n = 0 buffers non-empty.
std::vector<float> with_sentinel(std::vector<float> v, float sentinel) {
  v.push_back(sentinel);
  return v;
}

// b = a + s * noise: correlated with a (sum a*b does not cancel) when s is small, independent-looking when large.
std::vector<float> near_copy(const std::vector<float>& a, float s, uint32_t seed) {
  auto b = randu(a.size(), seed);
  for (size_t i = 0; i < a.size(); ++i) b[i] = a[i] + s * b[i];
  return b;
}

TEST(CudaArena, Dot3MatchesCpuWithinSummationBound) {
  DD_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    for (float s : {0.01f, 10.f}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " s=" + std::to_string(s));
      const auto a0 = randu(size_t(n), 1, -2.f, 2.f);
      const auto a = with_sentinel(a0, 1e30f), b = with_sentinel(near_copy(a0, s, 2), 1e30f);
      Dev<float> ga(a), gb(b);
      double got[3] = {-1, -1, -1}, ref[3];
      dot3(ga, gb, n, got);
      dd::ops::dot3(a.data(), b.data(), n, ref);
      // Each product a_i*b_i of two floats is exact in double (24 + 24 significand bits <= 53), so both sides
      // sum the same n exact terms p_i, the host in index order, the device in a fixed tree (per-thread sums,
      // block tree, partials). Any summation order of n terms errs by at most gamma_{n-1} * sum|p_i| with
      // gamma_k = k*u / (1 - k*u), u = eps/2 (Higham, Accuracy and Stability, 4.2); the two sides differ by at most
      // twice that, and 2 * gamma_{n-1} <= 2 * n * eps while n * u <= 1/2. Hence
      // |host - device| <= 2 * n * eps_double * sum|p_i| (exactly 0 for n <= 1: a single term is exact).
      double abs_sum[3] = {0, 0, 0};
      for (int64_t i = 0; i < n; ++i) {
        const double x = a[size_t(i)], y = b[size_t(i)];
        abs_sum[0] += x * x;
        abs_sum[1] += y * y;
        abs_sum[2] += std::fabs(x * y);
      }
      for (int k = 0; k < 3; ++k) {
        const double tol = 2.0 * double(n) * DBL_EPSILON * abs_sum[k];
        EXPECT_LE(std::fabs(got[k] - ref[k]), tol) << "sum " << k << ": got " << got[k] << " want " << ref[k];
        if (n <= 1) {
          EXPECT_EQ(bits(got[k]), bits(ref[k])) << "sum " << k;
        }
      }
    }
  }
}

TEST(CudaArena, Dot3IsDeterministic) {
  DD_REQUIRE_GPU();
  for (int64_t n : {int64_t(1000), (int64_t(1) << 20) + 7}) {
    const auto a = randu(size_t(n), 3), b = near_copy(a, 0.5f, 4);
    Dev<float> ga(a), gb(b);
    double r1[3], r2[3], r3[3];
    dot3(ga, gb, n, r1);
    dot3(ga, gb, n, r2);
    dd::cuops::fill_zero(gb, n / 2);  // other work in between, then the same data again
    Dev<float> gb2(b);
    dot3(ga, gb2, n, r3);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(bits(r1[k]), bits(r2[k])) << "n=" << n << " sum " << k;
      EXPECT_EQ(bits(r1[k]), bits(r3[k])) << "n=" << n << " sum " << k;
    }
  }
}

TEST(CudaArena, AllFiniteFindsNanAndInfAnywhere) {
  DD_REQUIRE_GPU();
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto x = with_sentinel(randu(size_t(n), 5, -3.f, 3.f), std::numeric_limits<float>::quiet_NaN());
    // Finite extremes must pass: the largest float, a subnormal, negative zero.
    if (n >= 1000) x[1] = FLT_MAX, x[2] = -FLT_MAX, x[3] = FLT_MIN / 4, x[4] = -0.f;
    Dev<float> gx(x);
    EXPECT_TRUE(all_finite(gx, n));
    EXPECT_TRUE(dd::ops::all_finite(x.data(), n));
    if (n == 0) continue;
    for (int64_t pos : {int64_t(0), n / 2, n - 1}) {
      for (float v : bad_values) {
        auto y = x;
        y[size_t(pos)] = v;
        Dev<float> gy(y);
        EXPECT_FALSE(all_finite(gy, n)) << "value " << v << " at " << pos;
        EXPECT_FALSE(dd::ops::all_finite(y.data(), n)) << "value " << v << " at " << pos;
      }
    }
  }
}

TEST(CudaArena, SubAndAddDiffBitwiseEqualCpu) {
  DD_REQUIRE_GPU();
  // Neither has a product, so no compiler may fuse anything: y = fl(a - b) and y = fl(y + fl(a - b)) are
  // correctly rounded IEEE operations on both sides, and the results are bitwise equal. (A tolerance of a few
  // ulps would also accept a different evaluation such as (y + a) - b.)
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto a0 = randu(size_t(n), 6, -4.f, 4.f);
    const auto a = with_sentinel(a0, 5.f), b = with_sentinel(near_copy(a0, 1e-3f, 7), 6.f),
               y0 = with_sentinel(randu(size_t(n), 8), 7.f);
    {
      auto y = y0;
      Dev<float> ga(a), gb(b), gy(y0);
      sub(gy, ga, gb, n);
      dd::ops::sub(y.data(), a.data(), b.data(), n);
      EXPECT_TRUE(same_bits(gy.host(), y)) << "sub";
      sub(ga, ga, gb, n);  // y aliasing a, then b
      y.back() = a.back();  // the sentinels now compared are a's, then b's
      EXPECT_TRUE(same_bits(ga.host(), y)) << "sub, y = a";
      Dev<float> ga2(a);
      sub(gb, ga2, gb, n);
      y.back() = b.back();
      EXPECT_TRUE(same_bits(gb.host(), y)) << "sub, y = b";
    }
    {
      auto y = y0;
      Dev<float> ga(a), gb(b), gy(y0);
      add_diff(gy, ga, gb, n);
      dd::ops::add_diff(y.data(), a.data(), b.data(), n);
      EXPECT_TRUE(same_bits(gy.host(), y)) << "add_diff";
    }
  }
}

TEST(CudaArena, OuterNesterovWithinRoundingBound) {
  DD_REQUIRE_GPU();
  const float lr = 0.7f, mu = 0.9f;
  const double u = std::ldexp(1.0, -24);  // unit roundoff of float (FLT_EPSILON / 2)
  for (int64_t n : kSizes) {
    for (float s : {1e-3f, 1.f}) {  // avg near the anchor (as after a sync round), or far from it
      SCOPED_TRACE("n=" + std::to_string(n) + " s=" + std::to_string(s));
      const auto base = randu(size_t(n), 9, -2.f, 2.f);
      const auto anchor0 = with_sentinel(base, 3.f), avg = with_sentinel(near_copy(base, s, 10), 4.f),
                 mom0 = with_sentinel(randu(size_t(n), 11, -0.5f, 0.5f), 5.f);
      auto anchor = anchor0, mom = mom0;
      Dev<float> ga(anchor0), gm(mom0), gv(avg);
      outer_nesterov(ga, gm, gv, n, lr, mu);
      dd::ops::outer_nesterov(anchor.data(), mom.data(), avg.data(), n, lr, mu);
      const auto a_got = ga.host(), m_got = gm.host();
      // g = fl(anchor - avg) is one rounding of the same operands: identical on both sides. Whether each side
      // fuses the multiply-adds or not, mom' = mu*mom + g carries at most two roundings, so it lies within
      // 2.01u * Sm of the exact value, Sm = |mu*mom| + |g|: the sides differ by at most tol_m = 5u * Sm. Given its
      // mom', anchor' = anchor - lr*(g + mu*mom') takes at most four roundings (gamma_4 ~ 4u of
      // Sa = |anchor| + |lr*g| + |lr*mu*mom'|), and mom' enters times lr*mu: the sides differ by at most
      // tol_a = 9u * Sa + |lr*mu| * tol_m. (With the same fusion on both sides they are bitwise equal.)
      size_t differ = 0;
      for (size_t i = 0; i < size_t(n); ++i) {
        const double g = double(anchor0[i] - avg[i]);
        const double tol_m = 5 * u * (std::fabs(double(mu) * mom0[i]) + std::fabs(g));
        const double m_mag = std::max(std::fabs(double(mom[i])), std::fabs(double(m_got[i])));
        const double tol_a = 9 * u * (std::fabs(double(anchor0[i])) + std::fabs(double(lr) * g) +
                                      std::fabs(double(lr) * mu) * m_mag) +
                             std::fabs(double(lr) * mu) * tol_m;
        ASSERT_LE(std::fabs(double(m_got[i]) - mom[i]), tol_m) << "mom at " << i;
        ASSERT_LE(std::fabs(double(a_got[i]) - anchor[i]), tol_a) << "anchor at " << i;
        differ += m_got[i] != mom[i] || a_got[i] != anchor[i];
      }
      EXPECT_EQ(a_got.back(), anchor0.back()) << "anchor sentinel";
      EXPECT_EQ(m_got.back(), mom0.back()) << "mom sentinel";
      std::printf("outer_nesterov n=%lld s=%g: %zu elements not bitwise equal to the host's\n",
                  static_cast<long long>(n), double(s), differ);
    }
  }
}

TEST(CudaArena, KernelTableEntriesAndStream) {
  DD_REQUIRE_GPU();
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  set_stream(st);
  dd::ops::Device& dev = dd::cuops::device();
  const int64_t n = (int64_t(1) << 20) + 7;
  const auto a = randu(size_t(n), 12), b = near_copy(a, 0.1f, 13);
  Dev<float> ga(a), gb(b), gy(static_cast<size_t>(n));
  double got[3], direct[3];
  dev.dot3(ga, gb, n, got);  // synchronizes st: the sums are on the host on return
  dot3(ga, gb, n, direct);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(bits(got[k]), bits(direct[k])) << "sum " << k;
  EXPECT_TRUE(dev.all_finite(ga, n));
  dev.sub(gy, ga, gb, n);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  set_stream(nullptr);
  std::vector<float> y(static_cast<size_t>(n));
  dd::ops::sub(y.data(), a.data(), b.data(), n);
  EXPECT_TRUE(same_bits(gy.host(), y));
  EXPECT_EQ(cudaStreamDestroy(st), cudaSuccess);
}

}  // namespace
}  // namespace dd::cuops::testing
