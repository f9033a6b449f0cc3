// gemm against a naive loop (all transpose combinations, padded leading dims); Linear gradients; threads knob.
#include <gtest/gtest.h>

#include "core/common/error.h"
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
