// gemm against a naive loop (all transpose combinations, padded leading dims); Linear gradients; threads knob.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

TEST(Gemm, MatchesNaiveForAllTransposes) {
  const int64_t M = 7, N = 5, K = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // Stored shapes: A is MxK or KxM, B is KxN or NxK; leading dims padded by 2 to catch ld mistakes.
      const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
      const int64_t lda = ac + 2, ldb = bc + 2, ldc = N + 2;
      auto A = randn(ar * lda, 1), B = randn(br * ldb, 2), C = randn(M * ldc, 3);
      auto ref = C;
      const float alpha = 0.7f, beta = 0.3f;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) {
            double a = ta ? A[k * lda + i] : A[i * lda + k];
            double b = tb ? B[j * ldb + k] : B[k * ldb + j];
            s += a * b;
          }
          ref[i * ldc + j] = static_cast<float>(alpha * s + beta * C[i * ldc + j]);
        }
      gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < ldc; ++j)
          EXPECT_NEAR(C[i * ldc + j], ref[i * ldc + j], 1e-5) << "ta=" << ta << " tb=" << tb << " at " << i << ","
                                                              << j;
    }
}

// A transposed A of more than 2^20 values (on a CPU without AVX-512 it is copied into row order before the
// product): against a double-precision sum, within the worst-case error of a K-term float dot product,
// (K + 2) u sum|alpha a b| + u |beta c| with u = 2^-24. M and K are not multiples of the copy's 8 x 8 blocks, and
// the leading dimensions are padded.
TEST(Gemm, LargeTransposedAMatchesDoubleSum) {
  const int64_t M = 1027, K = 1029, N = 3, lda = M + 3;
  for (int tb = 0; tb < 2; ++tb) {
    const int64_t ldb = tb ? K + 1 : N + 1, ldc = N + 2;
    auto A = randn(K * lda, 21), B = randn((tb ? N : K) * ldb, 22), C = randn(M * ldc, 23);
    const auto C0 = C;
    const float alpha = 0.5f, beta = 0.25f;
    gemm(true, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
    const double u = std::ldexp(1.0, -24);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, abs_sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(A[k * lda + i]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
          s += p, abs_sum += std::fabs(p);
        }
        const double ref = alpha * s + beta * double(C0[i * ldc + j]);
        const double bound = double(K + 2) * u * std::fabs(alpha) * abs_sum + u * std::fabs(beta * C0[i * ldc + j]);
        ASSERT_LE(std::fabs(C[i * ldc + j] - ref), bound) << "tb=" << tb << " at " << i << "," << j;
      }
  }
}

// A transposed-A product whose B rows lie a multiple of 1 KiB apart, over many rows (core/ops/gemm.cpp copies B to
// longer rows on AVX2 kernels): the same sums as a double-precision reference, and B's values past its N columns
// (NaN here) never read; once with an A large enough to be transposed first as well.
TEST(Gemm, TransposedAWithPowerOfTwoStridedBMatchesDoubleSum) {
  struct Case { int64_t M, N, K, ldb; };
  for (const Case c : {Case{37, 250, 300, 512}, Case{1024, 8, 1024, 256}}) {
    SCOPED_TRACE("M=" + std::to_string(c.M) + " ldb=" + std::to_string(c.ldb));
    const int64_t lda = c.M + 1, ldc = c.N + 2;
    auto A = randn(c.K * lda, 31), B = randn(c.K * c.ldb, 32), C = randn(c.M * ldc, 33);
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t j = c.N; j < c.ldb; ++j) B[k * c.ldb + j] = std::nanf("");
    const auto C0 = C;
    const float alpha = 0.5f, beta = 1.f;
    gemm(true, false, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), c.ldb, beta, C.data(), ldc);
    const double u = std::ldexp(1.0, -24);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0, abs_sum = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double p = double(A[k * lda + i]) * B[k * c.ldb + j];
          s += p, abs_sum += std::fabs(p);
        }
        const double ref = alpha * s + beta * double(C0[i * ldc + j]);
        const double bound = double(c.K + 2) * u * std::fabs(alpha) * abs_sum + u * std::fabs(beta * C0[i * ldc + j]);
        ASSERT_LE(std::fabs(C[i * ldc + j] - ref), bound) << "at " << i << "," << j;
      }
  }
}

TEST(Gemm, BetaZeroIgnoresGarbageInC) {
  auto A = randn(4 * 3, 4), B = randn(3 * 2, 5);
  std::vector<float> C(4 * 2, std::nanf(""));
  gemm(false, false, 4, 2, 3, 1.f, A.data(), 3, B.data(), 2, 0.f, C.data(), 2);
  for (float v : C) EXPECT_FALSE(std::isnan(v));
}

static void linear_case(int64_t N, int64_t in, int64_t out, bool bias) {
  SCOPED_TRACE("N=" + std::to_string(N) + " in=" + std::to_string(in) + " out=" + std::to_string(out) +
               (bias ? " bias" : " no bias"));
  auto x = randn(N * in, 10), W = randn(out * in, 11, 0.5f), b = randn(out, 12), R = randn(N * out, 13);
  std::vector<float> y(N * out);
  auto loss = [&] {
    linear_forward(y.data(), x.data(), W.data(), bias ? b.data() : nullptr, N, in, out);
    return dot(y, R);
  };
  loss();
  // Forward against a direct sum.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? b[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += static_cast<double>(x[n * in + i]) * W[o * in + i];
      EXPECT_NEAR(y[n * out + o], s, 1e-4);
    }
  std::vector<float> dx(x.size());
  auto dW = prefilled(W.size()), db = prefilled(out);
  linear_backward(dx.data(), dW.data(), bias ? db.data() : nullptr, R.data(), x.data(), W.data(), N, in, out);
  check_grad("linear dx", x, dx, loss);
  check_grad("linear dW", W, minus_prefill(dW), loss);
  if (bias) check_grad("linear db", b, minus_prefill(db), loss);
  // dx == nullptr must be accepted (first layer).
  linear_backward(nullptr, dW.data(), nullptr, R.data(), x.data(), W.data(), N, in, out);
}

TEST(Linear, GradientsWithBias) {
  linear_case(3, 5, 7, true);
  linear_case(4, 17, 9, true);
}

TEST(Linear, GradientsWithoutBias) {
  linear_case(3, 5, 7, false);
  linear_case(1, 6, 1, false);
}

TEST(Threads, SetAndQuery) {
  const int before = threads();
  set_threads(2);
  EXPECT_EQ(threads(), 2);
  set_threads(1);
  EXPECT_EQ(threads(), 1);
  EXPECT_THROW(set_threads(0), dd::UsageError);
  set_threads(before);
}

// matmul's epilogue (bias row, beta, ReLU) against a double-precision loop, on shapes large enough for oneDNN's
// optimized matmul and small ones it may route through sgemm. Tolerance: K products of N(0,1) values summed in
// float, |error| <= ~K * 2^-24 * sum|a*b|; 1e-5 * K bounds it for these sizes with room to spare.
TEST(Gemm, MatmulBiasBetaReluMatchesReference) {
  struct Case { int64_t M, N, K; bool ta, tb; float beta; bool bias, relu; };
  const Case cases[] = {{64, 96, 80, false, true, 0.f, true, true},   {64, 96, 80, false, true, 0.f, true, false},
                        {33, 40, 17, true, false, 1.f, false, false}, {33, 40, 17, false, false, 0.5f, true, true},
                        {5, 3, 2, true, true, 1.f, true, false},      {128, 64, 128, true, false, 1.f, false, false}};
  for (const auto& c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K));
    const int64_t lda = (c.ta ? c.M : c.K) + 1, ldb = (c.tb ? c.K : c.N) + 3, ldc = c.N + 2;
    auto A = randn((c.ta ? c.K : c.M) * lda, 31), B = randn((c.tb ? c.N : c.K) * ldb, 32);
    auto C = randn(c.M * ldc, 33), bias = randn(c.N, 34);
    auto ref = C;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k)
          s += double(c.ta ? A[k * lda + i] : A[i * lda + k]) * (c.tb ? B[j * ldb + k] : B[k * ldb + j]);
        if (c.bias) s += bias[j];
        s += double(c.beta) * C[i * ldc + j];
        ref[i * ldc + j] = float(c.relu && s < 0 ? 0.0 : s);
      }
    for (int rep = 0; rep < 2; ++rep) {  // the second call runs the cached primitive: same bits
      auto out = C;
      matmul(c.ta, c.tb, c.M, c.N, c.K, 1.f, A.data(), lda, B.data(), ldb, c.beta, out.data(), ldc,
             c.bias ? bias.data() : nullptr, c.relu);
      for (int64_t i = 0; i < c.M; ++i) {
        for (int64_t j = 0; j < c.N; ++j) EXPECT_NEAR(out[i * ldc + j], ref[i * ldc + j], 1e-5 * c.K) << i << "," << j;
        for (int64_t j = c.N; j < ldc; ++j) EXPECT_EQ(out[i * ldc + j], C[i * ldc + j]) << "pad touched";
      }
      static std::vector<float> first;
      if (rep == 0) first = out;
      else EXPECT_EQ(0, std::memcmp(first.data(), out.data(), 4 * out.size()));
    }
  }
}

TEST(Linear, FusedReluEqualsReluAfter) {
  const int64_t N = 64, in = 80, out = 96;
  auto x = randn(N * in, 41), W = randn(out * in, 42, 0.2f), b = randn(out, 43);
  std::vector<float> y(N * out), yr(N * out);
  linear_forward(y.data(), x.data(), W.data(), b.data(), N, in, out);
  relu_forward(y.data(), y.data(), N * out);
  linear_forward(yr.data(), x.data(), W.data(), b.data(), N, in, out, true);
  // Same GEMM either way; only where the max(.,0) happens differs. Allow the summation-order slack of K terms.
  for (int64_t i = 0; i < N * out; ++i) EXPECT_NEAR(yr[i], y[i], 1e-5 * in) << i;
}
