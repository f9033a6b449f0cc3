// 2x2 max pool (odd sizes too), k x k / stride / padding max pool, global average pool and embedding:
// reference values and gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
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

// ---- k x k / stride / padding max pool (the ResNet stem's 3x3 stride-2 pad-1) ----
namespace {
// Straightforward reference: every window position, padding as -infinity that never wins, first maximum wins.
void maxpool_ref(std::vector<float>& y, std::vector<int32_t>& idx, const std::vector<float>& x, int64_t planes,
                 int64_t H, int64_t W, int64_t k, int64_t s, int64_t p) {
  const int64_t Ho = maxpool_out(H, k, s, p), Wo = maxpool_out(W, k, s, p);
  y.assign(size_t(planes * Ho * Wo), 0.f);
  idx.assign(y.size(), -1);
  for (int64_t q = 0; q < planes; ++q)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        bool any = false;
        float m = 0;
        int32_t at = -1;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t h = oh * s - p + i, w = ow * s - p + j;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const float v = x[size_t((q * H + h) * W + w)];
            if (!any || v > m) m = v, at = int32_t(h * W + w), any = true;
          }
        y[size_t((q * Ho + oh) * Wo + ow)] = m;
        idx[size_t((q * Ho + oh) * Wo + ow)] = at;
      }
}

void maxpool_k_case(int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t p) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " H=" + std::to_string(H) + " W=" +
               std::to_string(W) + " k=" + std::to_string(k) + " s=" + std::to_string(s) + " p=" + std::to_string(p));
  const int64_t Ho = maxpool_out(H, k, s, p), Wo = maxpool_out(W, k, s, p);
  // Distinct values 0.05 apart: h = 1e-2 never reorders a window, so the loss is linear around x.
  auto x = spaced(N * C * H * W, 3, 0.05f), R = randn(N * C * Ho * Wo, 4);
  std::vector<float> y(R.size());
  std::vector<int32_t> idx(R.size());
  auto loss = [&] {
    maxpool_forward(y.data(), idx.data(), x.data(), N, C, H, W, k, s, p);
    return dot(y, R);
  };
  loss();
  std::vector<float> yr;
  std::vector<int32_t> ir;
  maxpool_ref(yr, ir, x, N * C, H, W, k, s, p);
  EXPECT_EQ(y, yr);
  EXPECT_EQ(idx, ir);
  std::vector<float> dx(x.size(), 99.f);  // overwritten everywhere
  maxpool_backward(dx.data(), R.data(), idx.data(), N, C, H, W, k, s, p);
  // Overlapping windows share inputs: the gradient of an input chosen twice is the sum, which the
  // finite difference sees as well.
  check_grad("maxpool k dx", x, dx, loss, 1e-2f, 1e-2, 1e-3, 400);
}
}  // namespace

TEST(MaxPool, K3Stride2Pad1Even) { maxpool_k_case(2, 3, 8, 8, 3, 2, 1); }
TEST(MaxPool, K3Stride2Pad1Odd) { maxpool_k_case(2, 2, 7, 9, 3, 2, 1); }
TEST(MaxPool, K3Stride2Pad1Tiny) { maxpool_k_case(3, 2, 1, 2, 3, 2, 1); }  // one-element windows at the edge
TEST(MaxPool, K3Stride1Pad0AndK2Stride2) {
  maxpool_k_case(2, 2, 6, 5, 3, 1, 0);
  maxpool_k_case(2, 2, 6, 6, 2, 2, 0);
}
TEST(MaxPool, ThreadedSize) { maxpool_k_case(4, 64, 16, 16, 3, 2, 1); }

// Padding never wins: with every input negative, each output is an input value, never the 0 or -inf of padding.
TEST(MaxPool, PaddingNeverWins) {
  const int64_t H = 4, W = 4;
  std::vector<float> x(size_t(H * W));
  for (size_t i = 0; i < x.size(); ++i) x[i] = -1.f - float(i);
  std::vector<float> y(4);
  std::vector<int32_t> idx(4);
  maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, H, W, 3, 2, 1);
  // Windows (rows, cols): [0,1]x[0,1], [0,1]x[1,3], [1,3]x[0,1], [1,3]x[1,3]; maximum at the top-left.
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(y, (std::vector<float>{-1.f, -2.f, -5.f, -6.f}));
}

// Ties: the first maximum in row-major window order wins (PyTorch's CPU and CUDA kernels), and a NaN wins.
TEST(MaxPool, TiesPickFirstAndNanWins) {
  std::vector<float> x(16, 1.f);  // all equal: every window picks its top-left valid element
  std::vector<float> y(4);
  std::vector<int32_t> idx(4);
  maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 4, 4, 3, 2, 1);
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 4, 5}));
  x[6] = 2.f;  // row 1, col 2: in windows 1 and 3
  x[9] = 2.f;  // row 2, col 1: in windows 2 and 3, after 6 in row-major order
  maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 4, 4, 3, 2, 1);
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 6, 9, 6}));
  // A shared argmax (index 6 in windows 1 and 3) gets both gradients.
  std::vector<float> dy{1.f, 10.f, 100.f, 1000.f}, dx(16);
  maxpool_backward(dx.data(), dy.data(), idx.data(), 1, 1, 4, 4, 3, 2, 1);
  EXPECT_EQ(dx[0], 1.f);
  EXPECT_EQ(dx[6], 1010.f);
  EXPECT_EQ(dx[9], 100.f);
  EXPECT_EQ(dx[5], 0.f);
  x[15] = std::nanf("");
  maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 4, 4, 3, 2, 1);
  EXPECT_EQ(idx[3], 15);
  EXPECT_TRUE(std::isnan(y[3]));
}

TEST(MaxPool, RejectsBadConfig) {
  std::vector<float> x(16), y(16);
  std::vector<int32_t> idx(16);
  EXPECT_THROW(maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 4, 4, 3, 2, 2), dd::UsageError);  // pad > k/2
  EXPECT_THROW(maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 4, 4, 3, 0, 1), dd::UsageError);
  EXPECT_THROW(maxpool_forward(y.data(), idx.data(), x.data(), 1, 1, 2, 2, 5, 1, 0), dd::UsageError);  // too small
}
