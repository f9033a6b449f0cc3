// The fused optimizer kernels (sgd_step, adamw_step) against the plain per-element formulas of PyTorch's SGD and
// AdamW, evaluated in double; and g comes back zeroed. The kernels are elementwise in float, so each element is
// a handful of roundings: a relative tolerance of 1e-6 on values of order 1 covers them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {
// Large enough for the threaded path (>= 2^21 elements) plus an odd tail for the vector remainder.
constexpr int64_t kN = (1 << 21) + 13;
}  // namespace

TEST(OptimStep, SgdVariantsMatchReference) {
  struct Case { float mu, wd; bool nesterov; };
  for (const Case c : {Case{0.f, 0.f, false}, Case{0.f, 0.01f, false}, Case{0.9f, 0.f, false},
                       Case{0.9f, 5e-4f, false}, Case{0.9f, 5e-4f, true}}) {
    SCOPED_TRACE("mu=" + std::to_string(c.mu) + " wd=" + std::to_string(c.wd) + (c.nesterov ? " nesterov" : ""));
    auto p = randn(kN, 1), g = randn(kN, 2), buf = randn(kN, 3);
    const auto p0 = p, g0 = g, b0 = buf;
    const float lr = 0.05f;
    for (int threads : {1, 2}) {
      set_threads(threads);
      p = p0, g = g0, buf = b0;
      sgd_step(p.data(), g.data(), buf.data(), kN, lr, c.mu, c.wd, c.nesterov);
      for (int64_t i = 0; i < kN; ++i) {
        const double d = double(g0[i]) + double(c.wd) * p0[i];
        double pe, be = b0[i];
        if (c.mu == 0.f) {
          pe = p0[i] - lr * d;
        } else {
          be = c.mu * double(b0[i]) + d;
          pe = p0[i] - lr * (c.nesterov ? d + c.mu * be : be);
          ASSERT_NEAR(buf[i], be, 1e-6 * (1 + std::fabs(be))) << i;
        }
        ASSERT_NEAR(p[i], pe, 1e-6 * (1 + std::fabs(pe))) << i;
        ASSERT_EQ(g[i], 0.f) << i;
      }
    }
    set_threads(1);
  }
}

TEST(OptimStep, AdamwMatchesReference) {
  auto p = randn(kN, 4), g = randn(kN, 5), m = randn(kN, 6, 0.1f), v = randn(kN, 7, 0.1f);
  for (auto& x : v) x = x * x;  // second moment is non-negative
  const auto p0 = p, g0 = g, m0 = m, v0 = v;
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, lr = 1e-3f, wd = 0.01f;
  const int t = 3;
  const double bc1 = 1 - std::pow(double(b1), t), bc2 = 1 - std::pow(double(b2), t);
  adamw_step(p.data(), g.data(), m.data(), v.data(), kN, b1, b2, eps, float(lr / bc1), float(1 / std::sqrt(bc2)),
             1.f - lr * wd);
  for (int64_t i = 0; i < kN; ++i) {
    const double me = b1 * double(m0[i]) + (1 - double(b1)) * g0[i];
    const double ve = b2 * double(v0[i]) + (1 - double(b2)) * double(g0[i]) * g0[i];
    const double pe = p0[i] * (1 - double(lr) * wd) - (lr / bc1) * me / (std::sqrt(ve / bc2) + eps);
    ASSERT_NEAR(m[i], me, 1e-6 * (1 + std::fabs(me))) << i;
    ASSERT_NEAR(v[i], ve, 1e-6 * (1 + std::fabs(ve))) << i;
    ASSERT_NEAR(p[i], pe, 1e-6 * (1 + std::fabs(pe))) << i;
    ASSERT_EQ(g[i], 0.f) << i;
  }
}

TEST(OptimStep, AllFiniteFindsInfAndNanAnywhere) {
  std::vector<float> v = randn(10000, 8, 1e30f);  // large but finite values
  EXPECT_TRUE(all_finite(v.data(), int64_t(v.size())));
  EXPECT_TRUE(all_finite(v.data(), 0));
  for (size_t at : {size_t(0), size_t(4095), size_t(4096), size_t(9999)}) {
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      auto w = v;
      w[at] = bad;
      EXPECT_FALSE(all_finite(w.data(), int64_t(w.size()))) << at << " " << bad;
      EXPECT_TRUE(all_finite(w.data(), int64_t(at))) << at;  // the prefix before it is finite
    }
  }
  v[5] = std::numeric_limits<float>::denorm_min();
  v[6] = std::numeric_limits<float>::max();
  EXPECT_TRUE(all_finite(v.data(), int64_t(v.size())));
}
