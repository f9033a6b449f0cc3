// Softmax cross-entropy: loss and accuracy count against a direct double computation, gradient of the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

TEST(SoftmaxXent, LossAndCorrectMatchDirect) {
  const int64_t N = 7, V = 11;
  auto logits = randn(N * V, 1, 3.f);
  logits[0] += 100.f;  // large logits must not overflow
  std::vector<int32_t> tg{0, 3, 10, 5, 5, 1, 9};
  std::vector<float> probs(N * V);
  int64_t correct = -1;
  const float loss = softmax_xent_forward(probs.data(), logits.data(), tg.data(), N, V, &correct);
  double ref = 0;
  int64_t ref_correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    double m = -1e300, z = 0;
    int64_t am = 0;
    for (int64_t j = 0; j < V; ++j)
      if (logits[n * V + j] > m) m = logits[n * V + j], am = j;
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits[n * V + j] - m);
    ref += -(logits[n * V + tg[n]] - m - std::log(z));
    ref_correct += am == tg[n];
    double ps = 0;
    for (int64_t j = 0; j < V; ++j) {
      EXPECT_NEAR(probs[n * V + j], std::exp(logits[n * V + j] - m) / z, 1e-6);
      ps += probs[n * V + j];
    }
    EXPECT_NEAR(ps, 1.0, 1e-5);
  }
  EXPECT_NEAR(loss, ref / N, 1e-5);
  EXPECT_EQ(correct, ref_correct);
  EXPECT_GE(ref_correct, 1);  // row 0 was rigged to be right
}

TEST(SoftmaxXent, Gradient) {
  for (auto [N, V] : {std::pair<int64_t, int64_t>{5, 9}, {3, 256}}) {
    auto logits = randn(N * V, 2, 2.f);
    std::vector<int32_t> tg(N);
    for (int64_t n = 0; n < N; ++n) tg[n] = static_cast<int32_t>((n * 7 + 3) % V);
    std::vector<float> probs(N * V), dl(N * V);
    auto loss = [&] { return double(softmax_xent_forward(probs.data(), logits.data(), tg.data(), N, V)); };
    loss();
    softmax_xent_backward(dl.data(), probs.data(), tg.data(), N, V, 1.f / N);
    check_grad("xent dlogits V=" + std::to_string(V), logits, dl, loss, 2e-2f, 2e-2, 5e-3);
  }
}

TEST(SoftmaxXent, RejectsOutOfRangeTarget) {
  std::vector<float> logits(6), probs(6);
  std::vector<int32_t> tg{0, 3};
  EXPECT_THROW(softmax_xent_forward(probs.data(), logits.data(), tg.data(), 2, 3), dd::UsageError);
}
