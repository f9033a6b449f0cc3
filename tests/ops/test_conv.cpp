// Conv2d (oneDNN): forward against a direct loop, finite-difference gradients for x and w, several shapes.
#include <gtest/gtest.h>

#include "base/error.h"
#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {
struct ConvCase {
  int64_t N, C, OC, H, W, k, s, p;
};

std::vector<float> conv_ref(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w) {
  const int64_t Ho = (c.H + 2 * c.p - c.k) / c.s + 1, Wo = (c.W + 2 * c.p - c.k) / c.s + 1;
  std::vector<float> y(c.N * c.OC * Ho * Wo);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.OC; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = 0;
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t i = 0; i < c.k; ++i)
              for (int64_t j = 0; j < c.k; ++j) {
                const int64_t ih = oh * c.s - c.p + i, iw = ow * c.s - c.p + j;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += static_cast<double>(x[((n * c.C + ci) * c.H + ih) * c.W + iw]) *
                     w[((o * c.C + ci) * c.k + i) * c.k + j];
              }
          y[((n * c.OC + o) * Ho + oh) * Wo + ow] = static_cast<float>(s);
        }
  return y;
}

void conv_case(const ConvCase& c) {
  SCOPED_TRACE("N=" + std::to_string(c.N) + " C=" + std::to_string(c.C) + " OC=" + std::to_string(c.OC) +
               " H=" + std::to_string(c.H) + " W=" + std::to_string(c.W) + " k=" + std::to_string(c.k) +
               " s=" + std::to_string(c.s) + " p=" + std::to_string(c.p));
  Conv2d conv(c.C, c.OC, c.k, c.s, c.p);
  const int64_t Ho = conv.out_h(c.H), Wo = conv.out_w(c.W);
  auto x = randn(c.N * c.C * c.H * c.W, 1), w = randn(c.OC * c.C * c.k * c.k, 2, 0.5f);
  auto R = randn(c.N * c.OC * Ho * Wo, 3);
  std::vector<float> y(R.size());
  auto loss = [&] {
    conv.forward(y.data(), x.data(), w.data(), c.N, c.H, c.W);
    return dot(y, R);
  };
  loss();
  auto ref = conv_ref(c, x, w);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4) << "output " << i;
  std::vector<float> dx(x.size());
  auto dw = prefilled(w.size());
  conv.backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), c.N, c.H, c.W);
  check_grad("conv dx", x, dx, loss);
  auto dw_net = minus_prefill(dw);
  check_grad("conv dw", w, dw_net, loss);
  // dx == nullptr (first layer) gives the same weight gradient.
  auto dw2 = prefilled(w.size());
  conv.backward(nullptr, dw2.data(), R.data(), x.data(), w.data(), c.N, c.H, c.W);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw2[i], dw[i]);
}
}  // namespace

TEST(Conv2d, K3Stride1Pad1) { conv_case({3, 5, 4, 7, 7, 3, 1, 1}); }
TEST(Conv2d, K3Stride2Pad1) { conv_case({2, 3, 6, 7, 9, 3, 2, 1}); }
TEST(Conv2d, K3Stride1Pad0) { conv_case({2, 4, 3, 6, 5, 3, 1, 0}); }
TEST(Conv2d, K3Stride2Pad0) { conv_case({3, 2, 5, 8, 7, 3, 2, 0}); }
TEST(Conv2d, K1Stride1) { conv_case({3, 5, 7, 5, 5, 1, 1, 0}); }
TEST(Conv2d, K1Stride2) { conv_case({2, 6, 4, 7, 7, 1, 2, 0}); }
TEST(Conv2d, SingleInputChannelBlockSizedOutput) { conv_case({2, 1, 16, 6, 6, 3, 1, 1}); }
TEST(Conv2d, BlockSizedChannels) { conv_case({2, 16, 32, 5, 5, 3, 1, 1}); }

// The ResNet-18/50 stem: 7x7, stride 2, padding 3, on 3 channels (odd and even sizes, windows past both edges).
TEST(Conv2d, K7Stride2Pad3Stem) {
  conv_case({2, 3, 4, 9, 9, 7, 2, 3});
  conv_case({2, 3, 5, 8, 6, 7, 2, 3});
}

TEST(Conv2d, OneObjectServesSeveralShapes) {
  // Primitives are cached per (N,H,W): switching shapes back and forth must not mix them up.
  ConvCase a{2, 3, 4, 7, 7, 3, 1, 1}, b{3, 3, 4, 5, 6, 3, 1, 1};
  Conv2d conv(3, 4, 3, 1, 1);
  for (int rep = 0; rep < 2; ++rep)
    for (const ConvCase& c : {a, b}) {
      auto x = randn(c.N * c.C * c.H * c.W, 7 + rep), w = randn(c.OC * c.C * 9, 8);
      std::vector<float> y(c.N * c.OC * conv.out_h(c.H) * conv.out_w(c.W));
      conv.forward(y.data(), x.data(), w.data(), c.N, c.H, c.W);
      auto ref = conv_ref(c, x, w);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4);
    }
}

TEST(Conv2d, RejectsBadConfig) {
  EXPECT_THROW(Conv2d(0, 4, 3, 1, 1), dd::UsageError);
  EXPECT_THROW(Conv2d(3, 4, 3, 0, 1), dd::UsageError);
  Conv2d conv(1, 1, 3, 1, 0);
  std::vector<float> x(4), w(9), y(4);
  EXPECT_THROW(conv.forward(y.data(), x.data(), w.data(), 1, 2, 2), dd::UsageError);
}
