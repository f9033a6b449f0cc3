// 2x2 max pool (odd sizes too), global average pool and embedding: reference values and gradients.
#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {
void maxpool_case(int64_t N, int64_t C, int64_t H, int64_t W) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " H=" + std::to_string(H) +
               " W=" + std::to_string(W));
  const int64_t Ho = H / 2, Wo = W / 2;
  auto x = spaced(N * C * H * W, 1, 0.05f), R = randn(N * C * Ho * Wo, 2);
  std::vector<float> y(R.size());
  std::vector<uint8_t> idx(R.size());
  auto loss = [&] {
    maxpool2_forward(y.data(), idx.data(), x.data(), N, C, H, W);
    return dot(y, R);
  };
  loss();
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        float m = -1e30f;
        int k = -1;
        for (int d = 0; d < 4; ++d) {
          float v = x[(p * H + 2 * oh + d / 2) * W + 2 * ow + d % 2];
          if (v > m) m = v, k = d;
        }
        EXPECT_EQ(y[(p * Ho + oh) * Wo + ow], m);
        EXPECT_EQ(idx[(p * Ho + oh) * Wo + ow], k);
      }
  std::vector<float> dx(x.size(), 99.f);  // overwritten everywhere, including unpooled odd rows/columns
  maxpool2_backward(dx.data(), R.data(), idx.data(), N, C, H, W);
  check_grad("maxpool dx", x, dx, loss, 1e-2f, 1e-2, 1e-3, 400);
}
}  // namespace

TEST(MaxPool2, Even) { maxpool_case(2, 3, 6, 8); }
TEST(MaxPool2, Odd) { maxpool_case(3, 5, 7, 9); }
TEST(MaxPool2, ThreadedSize) { maxpool_case(4, 64, 16, 16); }

TEST(MaxPool2, TiesPickFirst) {
  std::vector<float> x{1, 1, 1, 1, 0, 2, 2, 0}, y(2);
  std::vector<uint8_t> idx(2);
  maxpool2_forward(y.data(), idx.data(), x.data(), 2, 1, 2, 2);
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 1);
  EXPECT_EQ(y[1], 2.f);
}

TEST(AvgPoolGlobal, ForwardAndGradient) {
  const int64_t N = 3, C = 5, HW = 7;
  auto x = randn(N * C * HW, 3), R = randn(N * C, 4);
  std::vector<float> y(N * C), dx(x.size());
  auto loss = [&] {
    avgpool_global_forward(y.data(), x.data(), N, C, HW);
    return dot(y, R);
  };
  loss();
  for (int64_t p = 0; p < N * C; ++p) {
    double s = 0;
    for (int64_t i = 0; i < HW; ++i) s += x[p * HW + i];
    EXPECT_NEAR(y[p], s / HW, 1e-6);
  }
  avgpool_global_backward(dx.data(), R.data(), N, C, HW);
  check_grad("avgpool dx", x, dx, loss);
}

TEST(Embedding, GatherAndScatterAdd) {
  const int64_t V = 6, C = 5, N = 9;
  std::vector<int32_t> idx{0, 3, 3, 5, 1, 3, 0, 2, 5};  // repeats must accumulate
  auto W = randn(V * C, 5), R = randn(N * C, 6);
  std::vector<float> y(N * C);
  auto loss = [&] {
    embedding_forward(y.data(), idx.data(), W.data(), N, C);
    return dot(y, R);
  };
  loss();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(y[n * C + c], W[idx[n] * C + c]);
  auto dW = prefilled(W.size());
  embedding_backward(dW.data(), R.data(), idx.data(), N, C);
  auto net = minus_prefill(dW);
  check_grad("embedding dW", W, net, loss);
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(net[4 * C + c], 0.f);  // row 4 never looked up
  std::vector<int32_t> bad{0, -1};
  EXPECT_THROW(embedding_forward(y.data(), bad.data(), W.data(), 2, C), dd::UsageError);
}
