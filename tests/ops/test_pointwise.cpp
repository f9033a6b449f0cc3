// ReLU, exact-erf GELU (against std::erf) and add: forward values and finite-difference gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

TEST(Relu, ForwardAndGradient) {
  const int64_t n = 37;
  auto x = spaced(n, 1, 0.1f), R = randn(n, 2);  // |x| >= 0.05 > h keeps clear of the kink
  std::vector<float> y(n), dx(n);
  auto loss = [&] {
    relu_forward(y.data(), x.data(), n);
    return dot(y, R);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.f);
  relu_backward(dx.data(), R.data(), y.data(), n);
  check_grad("relu dx", x, dx, loss, 1e-2f);
  auto g = R;  // dx may alias dy
  relu_backward(g.data(), g.data(), y.data(), n);
  EXPECT_EQ(g, dx);
}

TEST(Gelu, ForwardMatchesErfFormula) {
  const int64_t n = 2001;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -10.f + 0.01f * i;
  gelu_forward(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], ref = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    EXPECT_NEAR(y[i], ref, 1e-6 * std::max(1.0, std::fabs(v))) << "x=" << v;
  }
}

TEST(Gelu, Gradient) {
  for (int64_t n : {1, 29, 300}) {
    auto x = randn(n, 3, 2.f), R = randn(n, 4);
    std::vector<float> y(n), dx(n);
    auto loss = [&] {
      gelu_forward(y.data(), x.data(), n);
      return dot(y, R);
    };
    gelu_backward(dx.data(), R.data(), x.data(), n);
    check_grad("gelu dx n=" + std::to_string(n), x, dx, loss, 1e-2f);
    auto g = R;
    gelu_backward(g.data(), g.data(), x.data(), n);
    EXPECT_EQ(g, dx);
  }
}

TEST(Gelu, LargeArraysUseSameValues) {
  // Above the parallel threshold results must equal the small-array path element for element.
  const int64_t n = (1 << 17) + 3;
  auto x = randn(n, 5, 3.f);
  std::vector<float> big(n), small(7);
  gelu_forward(big.data(), x.data(), n);
  gelu_forward(small.data(), x.data() + n - 7, 7);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(big[n - 7 + i], small[i]);
}

TEST(Add, SumsAndAccumulates) {
  auto a = randn(19, 6), b = randn(19, 7);
  std::vector<float> y(19);
  add(y.data(), a.data(), b.data(), 19);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(y[i], a[i] + b[i]);
  add_inplace(y.data(), a.data(), 19);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(y[i], (a[i] + b[i]) + a[i]);
  const auto a0 = a;
  add(a.data(), a.data(), b.data(), 19);  // y may alias an input
  for (int i = 0; i < 19; ++i) EXPECT_EQ(a[i], a0[i] + b[i]);
}
