// BatchNorm (train/eval, running stats as PyTorch) and LayerNorm: reference values and finite-difference grads.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {
void bn_case(int64_t N, int64_t C, int64_t HW) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " HW=" + std::to_string(HW));
  auto x = randn(N * C * HW, 1, 2.f), g = randn(C, 2), b = randn(C, 3), R = randn(N * C * HW, 4);
  for (auto& v : x) v += 0.5f;  // nonzero mean
  std::vector<float> y(x.size()), sm(C), si(C);
  auto rm0 = randn(C, 5), rv0 = randn(C, 6);
  for (auto& v : rv0) v = std::fabs(v) + 0.5f;
  auto rm = rm0, rv = rv0;
  batchnorm_forward_train(y.data(), sm.data(), si.data(), rm.data(), rv.data(), x.data(), g.data(), b.data(), N, C,
                          HW);
  const int64_t M = N * HW;
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) s += x[(n * C + c) * HW + i];
    const double mean = s / M;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) ss += std::pow(x[(n * C + c) * HW + i] - mean, 2);
    const double var = ss / M, invstd = 1.0 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(sm[c], mean, 1e-5);
    EXPECT_NEAR(si[c], invstd, 1e-4 * invstd);
    // PyTorch: running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance.
    EXPECT_NEAR(rm[c], 0.9 * rm0[c] + 0.1 * mean, 1e-5);
    EXPECT_NEAR(rv[c], 0.9 * rv0[c] + 0.1 * var * M / (M - 1), 1e-4);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t k = (n * C + c) * HW + i;
        EXPECT_NEAR(y[k], (x[k] - mean) * invstd * g[c] + b[c], 1e-4);
      }
  }
  // Eval mode uses the running statistics, not the batch's.
  std::vector<float> ye(x.size());
  batchnorm_forward_eval(ye.data(), x.data(), g.data(), b.data(), rm.data(), rv.data(), N, C, HW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t k = (n * C + c) * HW + i;
        EXPECT_NEAR(ye[k], (x[k] - rm[c]) / std::sqrt(rv[c] + 1e-5) * g[c] + b[c], 1e-4);
      }

  auto loss = [&] {
    auto rmt = rm0, rvt = rv0;
    std::vector<float> smt(C), sit(C);
    batchnorm_forward_train(y.data(), smt.data(), sit.data(), rmt.data(), rvt.data(), x.data(), g.data(), b.data(),
                            N, C, HW);
    return dot(y, R);
  };
  std::vector<float> dx(x.size());
  auto dg = prefilled(C), db = prefilled(C);
  batchnorm_backward(dx.data(), dg.data(), db.data(), R.data(), x.data(), g.data(), sm.data(), si.data(), N, C, HW);
  check_grad("bn dx", x, dx, loss, 1e-2f, 3e-2, 3e-3);
  check_grad("bn dgamma", g, minus_prefill(dg), loss);
  check_grad("bn dbeta", b, minus_prefill(db), loss);
}
}  // namespace

TEST(BatchNorm, Train2d) { bn_case(3, 5, 7 * 7); }
TEST(BatchNorm, Train1d) { bn_case(4, 3, 1); }
TEST(BatchNorm, TrainThreadedSize) { bn_case(8, 8, 512); }  // crosses the parallel-over-channels threshold

TEST(BatchNorm, RejectsSingleValuePerChannel) {
  std::vector<float> x(3), y(3), g(3, 1.f), b(3, 0.f), sm(3), si(3), rm(3), rv(3);
  EXPECT_THROW(batchnorm_forward_train(y.data(), sm.data(), si.data(), rm.data(), rv.data(), x.data(), g.data(),
                                       b.data(), 1, 3, 1),
               dd::UsageError);
}

namespace {
void ln_case(int64_t N, int64_t C) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
  auto x = randn(N * C, 11, 1.5f), w = randn(C, 12), b = randn(C, 13), R = randn(N * C, 14);
  std::vector<float> y(x.size()), mean(N), rstd(N);
  auto loss = [&] {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(y, R);
  };
  loss();
  for (int64_t n = 0; n < N; ++n) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < C; ++i) s += x[n * C + i];
    const double m = s / C;
    for (int64_t i = 0; i < C; ++i) ss += std::pow(x[n * C + i] - m, 2);
    const double r = 1.0 / std::sqrt(ss / C + 1e-5);
    EXPECT_NEAR(mean[n], m, 1e-5);
    EXPECT_NEAR(rstd[n], r, 1e-4 * r);
    for (int64_t i = 0; i < C; ++i) EXPECT_NEAR(y[n * C + i], (x[n * C + i] - m) * r * w[i] + b[i], 1e-4);
  }
  std::vector<float> dx(x.size());
  auto dw = prefilled(C), db = prefilled(C);
  layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  check_grad("ln dx", x, dx, loss, 1e-2f, 3e-2, 3e-3);
  check_grad("ln dw", w, minus_prefill(dw), loss);
  check_grad("ln db", b, minus_prefill(db), loss);
}
}  // namespace

TEST(LayerNorm, SmallOdd) { ln_case(5, 7); }
TEST(LayerNorm, Wider) { ln_case(3, 33); }
TEST(LayerNorm, ThreadedSize) { ln_case(300, 256); }  // crosses the parallel-over-rows threshold
