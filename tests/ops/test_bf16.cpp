// --precision bf16 (base/precision.h): Linear, Conv2d and attention, forward and backward, against a
// double-precision reference, within a bound derived from bf16's precision, not tuned to a machine.
//
// The bound. bf16 keeps 8 significant bits: rounding to nearest gives a relative error of at most u = 2^-8. A
// product of two rounded inputs is exact in fp32 (8 + 8 bits), so each term a_i b_i carries a relative error of at
// most (1+u)^2 - 1 = 2u + u^2. Summing K terms (and the epilogue: alpha, beta * C, a bias: 3 more operations) in
// fp32 adds at most gamma_{K+3} = (K+3) u32 / (1 - (K+3) u32) of the sum of magnitudes (u32 = 2^-24; the standard
// bound for any summation order, Higham, Accuracy and Stability of Numerical Algorithms, 3.1). So
//   |computed - exact| <= (2u + u^2) S + gamma_{K+3} ((1+u)^2 S + E),   S = sum |a_i| |b_i|,  E = |beta C| + |bias|.
// Attention adds the softmax between two GEMMs; its bound is carried through it below (attention_bound). Every
// case must also err above the fp32 part of the bound somewhere (bf16 really computed), and a clearly wrong
// computation (fp32 with one term of each sum dropped) must exceed the bf16 bound somewhere (the bound can fail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/ops/ops.h"
#include "tests/ops/bf16_bounds.h"

using namespace dd;
using namespace dd::ops;
using namespace dd::bf16_test;

namespace {

double bf16_bound(double S, double E, double K) { return gemm_term(S, K) + gamma32(K + 3) * E; }
double fp32_bound(double S, double E, double K) { return gamma32(K + 3) * (S + E); }

using Bf16 = Fixture;

// ---- Linear: y = x W^T + b; dx = dy W; dW += dy^T x ----
struct LinearRun {
  std::vector<float> y, dx, dW;
};
LinearRun linear_run(Precision p, const std::vector<float>& x, const std::vector<float>& W, const std::vector<float>& b,
                     const std::vector<float>& dy, const std::vector<float>& dW0, int64_t N, int64_t in, int64_t out) {
  set_precision(p);
  LinearRun r{std::vector<float>(N * out), std::vector<float>(N * in), dW0};
  std::vector<float> db(out, 0.f);
  linear_forward(r.y.data(), x.data(), W.data(), b.data(), N, in, out);
  linear_backward(r.dx.data(), r.dW.data(), db.data(), dy.data(), x.data(), W.data(), N, in, out);
  set_precision(Precision::fp32);
  return r;
}

// Ratios of y, dx, dW against the exact values of the given inputs.
Ratio linear_ratio(const LinearRun& r, const std::vector<float>& x, const std::vector<float>& W,
                   const std::vector<float>& b, const std::vector<float>& dy, const std::vector<float>& dW0, int64_t N,
                   int64_t in, int64_t out) {
  Ratio q;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o], S = 0;
      for (int64_t i = 0; i < in; ++i) s += double(x[n * in + i]) * W[o * in + i], S += std::fabs(double(x[n * in + i]) * W[o * in + i]);
      q.add(r.y[n * out + o], s, bf16_bound(S, std::fabs(b[o]), in), fp32_bound(S, std::fabs(b[o]), in));
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0, S = 0;
      for (int64_t o = 0; o < out; ++o) s += double(dy[n * out + o]) * W[o * in + i], S += std::fabs(double(dy[n * out + o]) * W[o * in + i]);
      q.add(r.dx[n * in + i], s, bf16_bound(S, 0, out), fp32_bound(S, 0, out));
    }
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double s = dW0[o * in + i], S = 0;
      for (int64_t n = 0; n < N; ++n) s += double(dy[n * out + o]) * x[n * in + i], S += std::fabs(double(dy[n * out + o]) * x[n * in + i]);
      const double E = std::fabs(dW0[o * in + i]);
      q.add(r.dW[o * in + i], s, bf16_bound(S, E, N) + gamma32(1) * E, fp32_bound(S, E, N));
    }
  return q;
}

TEST_F(Bf16, LinearForwardBackwardWithinBound) {
  const int64_t N = 48, in = 200, out = 72;
  const auto x = normal(N * in, 1), W = normal(out * in, 2, 0.1f), b = normal(out, 3), dy = normal(N * out, 4),
             dW0 = normal(out * in, 5, 0.01f);
  const Ratio q = linear_ratio(linear_run(Precision::bf16, x, W, b, dy, dW0, N, in, out), x, W, b, dy, dW0, N, in, out);
  std::printf("error / bf16 bound %.3g, error / fp32 bound %.3g\n", q.bf16, q.fp32);
  EXPECT_LE(q.bf16, 1.0) << "bf16 Linear outside the bf16 bound";
  EXPECT_GT(q.fp32, 1.0) << "bf16 Linear within fp32's bound everywhere: did it compute in bf16?";
  // Wrong: fp32 with the first input feature dropped from every sum (x's column 0 and W's column 0 zeroed).
  auto x2 = x, W2 = W;
  for (int64_t n = 0; n < N; ++n) x2[n * in] = 0;
  for (int64_t o = 0; o < out; ++o) W2[o * in] = 0;
  const Ratio wrong = linear_ratio(linear_run(Precision::fp32, x2, W2, b, dy, dW0, N, in, out), x, W, b, dy, dW0, N, in, out);
  EXPECT_GT(wrong.bf16, 1.0) << "the bound does not catch a dropped term";
  // fp32 itself is inside its own bound (the reference and the bounds are right).
  EXPECT_LE(linear_ratio(linear_run(Precision::fp32, x, W, b, dy, dW0, N, in, out), x, W, b, dy, dW0, N, in, out).fp32, 1.0);
}

// ---- Conv2d: every (output, input, weight) triple of the convolution feeds y, dx and dW ----
struct ConvShape {
  int64_t N, C, OC, H, W, k, s, p;
  int64_t Ho() const { return (H + 2 * p - k) / s + 1; }
  int64_t Wo() const { return (W + 2 * p - k) / s + 1; }
};

Ratio conv_ratio(const ConvShape& c, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& dy, const std::vector<float>& dw0, const std::vector<float>& y,
                 const std::vector<float>& dx, const std::vector<float>& dw) {
  const int64_t Ho = c.Ho(), Wo = c.Wo();
  std::vector<double> ye(y.size()), yS(y.size()), dxe(dx.size()), dxS(dx.size()), dwe(dw0.begin(), dw0.end()),
      dwS(dw.size());
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.OC; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow)
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t i = 0; i < c.k; ++i)
              for (int64_t j = 0; j < c.k; ++j) {
                const int64_t ih = oh * c.s - c.p + i, iw = ow * c.s - c.p + j;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const int64_t yi = ((n * c.OC + o) * Ho + oh) * Wo + ow, xi = ((n * c.C + ci) * c.H + ih) * c.W + iw,
                              wi = ((o * c.C + ci) * c.k + i) * c.k + j;
                ye[yi] += double(x[xi]) * w[wi], yS[yi] += std::fabs(double(x[xi]) * w[wi]);
                dxe[xi] += double(dy[yi]) * w[wi], dxS[xi] += std::fabs(double(dy[yi]) * w[wi]);
                dwe[wi] += double(dy[yi]) * x[xi], dwS[wi] += std::fabs(double(dy[yi]) * x[xi]);
              }
  Ratio q;
  const double Ky = c.C * c.k * c.k, Kx = c.OC * c.k * c.k, Kw = c.N * Ho * Wo;
  for (size_t i = 0; i < y.size(); ++i) q.add(y[i], ye[i], bf16_bound(yS[i], 0, Ky), fp32_bound(yS[i], 0, Ky));
  for (size_t i = 0; i < dx.size(); ++i) q.add(dx[i], dxe[i], bf16_bound(dxS[i], 0, Kx), fp32_bound(dxS[i], 0, Kx));
  for (size_t i = 0; i < dw.size(); ++i) {
    const double E = std::fabs(dw0[i]);
    q.add(dw[i], dwe[i], bf16_bound(dwS[i], E, Kw) + gamma32(1) * E, fp32_bound(dwS[i], E, Kw));
  }
  return q;
}

struct ConvRun {
  std::vector<float> y, dx, dw;
};
ConvRun conv_run(Precision p, const ConvShape& c, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& dy, const std::vector<float>& dw0) {
  set_precision(p);
  Conv2d conv(c.C, c.OC, c.k, c.s, c.p);
  ConvRun r{std::vector<float>(c.N * c.OC * c.Ho() * c.Wo()), std::vector<float>(x.size()), dw0};
  conv.forward(r.y.data(), x.data(), w.data(), c.N, c.H, c.W);
  conv.backward(r.dx.data(), r.dw.data(), dy.data(), x.data(), w.data(), c.N, c.H, c.W);
  set_precision(Precision::fp32);
  return r;
}

TEST_F(Bf16, ConvForwardBackwardWithinBound) {
  for (const ConvShape c : {ConvShape{2, 16, 24, 10, 10, 3, 1, 1}, ConvShape{2, 32, 16, 9, 9, 3, 2, 1}}) {
    SCOPED_TRACE("C=" + std::to_string(c.C) + " OC=" + std::to_string(c.OC) + " stride=" + std::to_string(c.s));
    const auto x = normal(c.N * c.C * c.H * c.W, 11), w = normal(c.OC * c.C * c.k * c.k, 12, 0.1f),
               dy = normal(c.N * c.OC * c.Ho() * c.Wo(), 13), dw0 = normal(w.size(), 14, 0.01f);
    const ConvRun r = conv_run(Precision::bf16, c, x, w, dy, dw0);
    const Ratio q = conv_ratio(c, x, w, dy, dw0, r.y, r.dx, r.dw);
    std::printf("error / bf16 bound %.3g, error / fp32 bound %.3g\n", q.bf16, q.fp32);
    EXPECT_LE(q.bf16, 1.0) << "bf16 Conv2d outside the bf16 bound";
    EXPECT_GT(q.fp32, 1.0) << "bf16 Conv2d within fp32's bound everywhere: did it compute in bf16?";
    // Wrong: fp32 with input channel 0 zeroed in x and w (a term of every sum dropped).
    auto x2 = x, w2 = w;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t i = 0; i < c.H * c.W; ++i) x2[n * c.C * c.H * c.W + i] = 0;
    for (int64_t o = 0; o < c.OC; ++o)
      for (int64_t i = 0; i < c.k * c.k; ++i) w2[o * c.C * c.k * c.k + i] = 0;
    const ConvRun bad = conv_run(Precision::fp32, c, x2, w2, dy, dw0);
    EXPECT_GT(conv_ratio(c, x, w, dy, dw0, bad.y, bad.dx, bad.dw).bf16, 1.0) << "the bound does not catch a dropped term";
    const ConvRun f = conv_run(Precision::fp32, c, x, w, dy, dw0);
    EXPECT_LE(conv_ratio(c, x, w, dy, dw0, f.y, f.dx, f.dw).fp32, 1.0);
  }
}

}  // namespace
