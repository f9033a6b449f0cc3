// dd::cuops against the CPU dd::ops reference (label gpu; skipped without a CUDA device): GEMMs, Linear,
// pointwise ops, Conv2d, optimizer updates, and the stream setting.
#include <cfloat>
#include <cmath>
#include <tuple>

#include "core/ops/ops.h"
#include "tests/gpu/test_kernels_util.h"

namespace dd::cuops::testing {
namespace {

TEST(CudaKernels, GemmAllTransposesMatchCpu) {
  DD_REQUIRE_GPU();
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{13, 17, 9}, {64, 96, 128}, {1, 256, 784}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      // Padded leading dimensions catch lda/ldb/ldc mix-ups.
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
      const auto A = randu(static_cast<size_t>((ta ? K : M) * lda), 1 + t),
                 B = randu(static_cast<size_t>((tb ? N : K) * ldb), 11 + t);
      auto C = randu(static_cast<size_t>(M * ldc), 21 + t);
      Dev<float> dA(A), dB(B), dC(C);
      gemm(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.3f, dC, ldc);
      dd::ops::gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, 0.3f, C.data(), ldc);
      EXPECT_TRUE(near(dC.host(), C, 1e-4)) << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb;
    }
  }
}

TEST(CudaKernels, GemmStridedBatchedMatchesLoop) {
  DD_REQUIRE_GPU();
  const int64_t M = 16, N = 8, K = 16, batch = 3, sA = M * K + 7, sB = K * N + 5, sC = M * N + 3;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    const auto A = randu(static_cast<size_t>(sA * batch), 3), B = randu(static_cast<size_t>(sB * batch), 4);
    auto C = randu(static_cast<size_t>(sC * batch), 5);
    Dev<float> dA(A), dB(B), dC(C);
    gemm_strided_batched(ta, tb, M, N, K, 1.3f, dA, lda, sA, dB, ldb, sB, 0.5f, dC, N, sC, batch);
    for (int64_t b = 0; b < batch; ++b)
      dd::ops::gemm(ta, tb, M, N, K, 1.3f, A.data() + b * sA, lda, B.data() + b * sB, ldb, 0.5f, C.data() + b * sC, N);
    EXPECT_TRUE(near(dC.host(), C, 1e-4)) << "ta=" << ta << " tb=" << tb;
  }
}

TEST(CudaKernels, LinearForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  // 700 rows: the bias gradient sums over three row chunks (col_reduce.cuh), 10 columns: less than one tile.
  for (auto [N, in, out] : {std::tuple<int64_t, int64_t, int64_t>{8, 784, 64}, {5, 33, 10}, {700, 16, 10}}) {
    for (bool bias : {true, false}) {
      const auto x = randu(static_cast<size_t>(N * in), 1), W = randu(static_cast<size_t>(out * in), 2, -0.1f, 0.1f),
                 b = randu(static_cast<size_t>(out), 3);
      const auto dy = randu(static_cast<size_t>(N * out), 4);
      // Parameter grads start non-zero: they must be accumulated into, not overwritten.
      auto dW = randu(static_cast<size_t>(out * in), 5), db = randu(static_cast<size_t>(out), 6);
      std::vector<float> y(static_cast<size_t>(N * out)), dx(static_cast<size_t>(N * in));
      Dev<float> gx(x), gW(W), gb(b), gdy(dy), gdW(dW), gdb(db), gy(y.size()), gdx(dx.size());
      linear_forward(gy, gx, gW, bias ? gb.get() : nullptr, N, in, out);
      linear_backward(gdx, gdW, bias ? gdb.get() : nullptr, gdy, gx, gW, N, in, out);
      dd::ops::linear_forward(y.data(), x.data(), W.data(), bias ? b.data() : nullptr, N, in, out);
      dd::ops::linear_backward(dx.data(), dW.data(), bias ? db.data() : nullptr, dy.data(), x.data(), W.data(), N, in,
                               out);
      EXPECT_TRUE(near(gy.host(), y, 1e-4)) << "y N=" << N << " bias=" << bias;
      EXPECT_TRUE(near(gdx.host(), dx, 1e-4)) << "dx";
      EXPECT_TRUE(near(gdW.host(), dW, 1e-4)) << "dW";
      EXPECT_TRUE(near(gdb.host(), db, 1e-4)) << "db";
      // Null dx: only parameter gradients (a second accumulation).
      linear_backward(nullptr, gdW, nullptr, gdy, gx, gW, N, in, out);
      dd::ops::linear_backward(nullptr, dW.data(), nullptr, dy.data(), x.data(), W.data(), N, in, out);
      EXPECT_TRUE(near(gdW.host(), dW, 1e-4)) << "dW after null-dx backward";
    }
  }
}

TEST(CudaKernels, PointwiseOpsMatchCpu) {
  DD_REQUIRE_GPU();
  for (int64_t n : {1, 1000, 70001}) {
    const auto x = randu(static_cast<size_t>(n), 7, -4.f, 4.f), a = randu(static_cast<size_t>(n), 8),
               dy = randu(static_cast<size_t>(n), 9);
    std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    Dev<float> gx(x), ga(a), gdy(dy), gy(static_cast<size_t>(n)), gdx(static_cast<size_t>(n));

    relu_forward(gy, gx, n);
    dd::ops::relu_forward(y.data(), x.data(), n);
    EXPECT_EQ(gy.host(), y) << "relu n=" << n;
    relu_backward(gdx, gdy, gy, n);
    dd::ops::relu_backward(dx.data(), dy.data(), y.data(), n);
    EXPECT_EQ(gdx.host(), dx) << "relu backward";

    // GELU = 0.5 x (1 + erf(x / sqrt 2)). The two sides' erf differ by a few units in the last place of a number
    // near 1 (CUDA's erff: 2 ulp; the host's vectorized erf: its own); for x < 0 the sum 1 + erf cancels, so that
    // difference is absolute: |dy| <= 0.5 |x| * 8 FLT_EPSILON, and |d dx| <= |dy| * 0.5 * 8 FLT_EPSILON.
    std::vector<double> atol_y(x.size()), atol_dx(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      atol_y[i] = 0.5 * std::fabs(double(x[i])) * 8 * FLT_EPSILON;
      atol_dx[i] = std::fabs(double(dy[i])) * 0.5 * 8 * FLT_EPSILON;
    }
    gelu_forward(gy, gx, n);
    dd::ops::gelu_forward(y.data(), x.data(), n);
    EXPECT_TRUE(near(gy.host(), y, 1e-5, atol_y)) << "gelu n=" << n;
    gelu_backward(gdx, gdy, gx, n);
    dd::ops::gelu_backward(dx.data(), dy.data(), x.data(), n);
    EXPECT_TRUE(near(gdx.host(), dx, 1e-5, atol_dx)) << "gelu backward";
    // In place (dx aliases dy), as the header allows.
    Dev<float> gd2(dy);
    gelu_backward(gd2, gd2, gx, n);
    EXPECT_TRUE(near(gd2.host(), dx, 1e-5, atol_dx)) << "gelu backward in place";

    add(gy, gx, ga, n);
    dd::ops::add(y.data(), x.data(), a.data(), n);
    EXPECT_EQ(gy.host(), y) << "add";
    add_inplace(gy, ga, n);
    dd::ops::add_inplace(y.data(), a.data(), n);
    EXPECT_EQ(gy.host(), y) << "add_inplace";

    scale_inplace(gy, -0.25f, n);
    for (auto& v : y) v *= -0.25f;
    EXPECT_EQ(gy.host(), y) << "scale_inplace";
    fill_zero(gy, n);
    EXPECT_EQ(gy.host(), std::vector<float>(static_cast<size_t>(n), 0.f)) << "fill_zero";
  }
}

struct ConvCase {
  int64_t N, C, OC, k, stride, pad, H, W;
};

TEST(CudaKernels, Conv2dForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  // The cnn/resnet20 shapes: 1->32 on 28x28, 32->64, stride-2 3x3 and the 1x1 stride-2 projection; odd sizes;
  // the resnet18/50 stem (7x7, stride 2, padding 3, 3 -> 64 channels).
  for (const ConvCase& c : {ConvCase{4, 1, 32, 3, 1, 1, 28, 28}, ConvCase{2, 32, 64, 3, 1, 1, 14, 14},
                            ConvCase{3, 16, 32, 3, 2, 1, 15, 13}, ConvCase{2, 16, 32, 1, 2, 0, 28, 28},
                            ConvCase{2, 3, 64, 7, 2, 3, 32, 32}, ConvCase{2, 3, 8, 7, 2, 3, 9, 7}}) {
    dd::ops::Conv2d cpu(c.C, c.OC, c.k, c.stride, c.pad);
    Conv2d gpu(c.C, c.OC, c.k, c.stride, c.pad);
    const int64_t Ho = cpu.out_h(c.H), Wo = cpu.out_w(c.W);
    ASSERT_EQ(gpu.out_h(c.H), Ho);
    ASSERT_EQ(gpu.out_w(c.W), Wo);
    const auto x = randu(static_cast<size_t>(c.N * c.C * c.H * c.W), 31),
               w = randu(static_cast<size_t>(c.OC * c.C * c.k * c.k), 32, -0.3f, 0.3f);
    const auto dy = randu(static_cast<size_t>(c.N * c.OC * Ho * Wo), 33);
    auto dw = randu(w.size(), 34);
    std::vector<float> y(dy.size()), dx(x.size());
    Dev<float> gx(x), gw(w), gdy(dy), gdw(dw), gy(y.size()), gdx(dx.size());
    // Twice: the second call reuses the cached plan and workspace, and dw accumulates twice.
    for (int rep = 0; rep < 2; ++rep) {
      gpu.forward(gy, gx, gw, c.N, c.H, c.W);
      gpu.backward(gdx, gdw, gdy, gx, gw, c.N, c.H, c.W);
      cpu.forward(y.data(), x.data(), w.data(), c.N, c.H, c.W);
      cpu.backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), c.N, c.H, c.W);
    }
    const std::string what = "conv C=" + std::to_string(c.C) + " OC=" + std::to_string(c.OC) +
                             " k=" + std::to_string(c.k) + " s=" + std::to_string(c.stride);
    EXPECT_TRUE(near(gy.host(), y, 1e-4)) << what << " y";
    EXPECT_TRUE(near(gdx.host(), dx, 1e-4)) << what << " dx";
    EXPECT_TRUE(near(gdw.host(), dw, 1e-3)) << what << " dw";
    // First layer: no dx.
    gpu.backward(nullptr, gdw, gdy, gx, gw, c.N, c.H, c.W);
    cpu.backward(nullptr, dw.data(), dy.data(), x.data(), w.data(), c.N, c.H, c.W);
    EXPECT_TRUE(near(gdw.host(), dw, 1e-3)) << what << " dw (null dx)";
  }
}

// The update formulas of core/optim/optimizer.cpp, written out for one parameter slice.
void sgd_ref(std::vector<float>& p, std::vector<float>& g, std::vector<float>& buf, float lr, float mu, bool nesterov,
             float wd) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (mu == 0.f) {
      p[i] -= lr * (g[i] + wd * p[i]);
    } else if (nesterov) {
      const float d = g[i] + wd * p[i], b = mu * buf[i] + d;
      buf[i] = b;
      p[i] -= lr * (d + mu * b);
    } else {
      const float b = mu * buf[i] + (g[i] + wd * p[i]);
      buf[i] = b;
      p[i] -= lr * b;
    }
    g[i] = 0.f;
  }
}

void adamw_ref(std::vector<float>& p, std::vector<float>& g, std::vector<float>& m, std::vector<float>& v, float lr,
               float b1, float b2, float eps, float wd, int64_t step) {
  const double t = double(step);
  const float bc1 = float(1.0 - std::pow(double(b1), t)), bc2 = float(1.0 - std::pow(double(b2), t));
  const float stp = lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2), decay = 1.0f - lr * wd;
  for (size_t i = 0; i < p.size(); ++i) {
    const float gi = g[i], mi = b1 * m[i] + (1.0f - b1) * gi, vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - stp * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    g[i] = 0.f;
  }
}

TEST(CudaKernels, SgdUpdateMatchesCpuAndZeroesGrad) {
  DD_REQUIRE_GPU();
  const size_t n = 5003;
  for (auto [mu, nesterov, wd] : {std::tuple<float, bool, float>{0.f, false, 0.f},
                                  {0.f, false, 1e-2f},
                                  {0.9f, false, 5e-4f},
                                  {0.9f, true, 5e-4f}}) {
    auto p = randu(n, 41), buf = std::vector<float>(n, 0.f);
    Dev<float> gp(p), gbuf(buf), gg(n);
    for (int step = 0; step < 3; ++step) {
      auto g = randu(n, 50 + step);
      gg.upload(g);
      sgd_update(gp, gg, gbuf, int64_t(n), 0.1f, mu, nesterov, wd);
      sgd_ref(p, g, buf, 0.1f, mu, nesterov, wd);
      EXPECT_EQ(gg.host(), std::vector<float>(n, 0.f)) << "grad not zeroed, mu=" << mu;
    }
    EXPECT_TRUE(near(gp.host(), p, 1e-5)) << "p mu=" << mu << " nesterov=" << nesterov << " wd=" << wd;
    EXPECT_TRUE(near(gbuf.host(), buf, 1e-5)) << "momentum buffer";
  }
}

TEST(CudaKernels, AdamwUpdateMatchesCpuAndZeroesGrad) {
  DD_REQUIRE_GPU();
  const size_t n = 4099;
  auto p = randu(n, 61), m = std::vector<float>(n, 0.f), v = std::vector<float>(n, 0.f);
  Dev<float> gp(p), gm(m), gv(v), gg(n);
  for (int64_t step = 1; step <= 4; ++step) {
    auto g = randu(n, 70 + uint32_t(step));
    gg.upload(g);
    adamw_update(gp, gg, gm, gv, int64_t(n), 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
    adamw_ref(p, g, m, v, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
    EXPECT_EQ(gg.host(), std::vector<float>(n, 0.f)) << "grad not zeroed at step " << step;
  }
  EXPECT_TRUE(near(gp.host(), p, 1e-5)) << "p";
  EXPECT_TRUE(near(gm.host(), m, 1e-5)) << "m";
  EXPECT_TRUE(near(gv.host(), v, 1e-5)) << "v";
  EXPECT_THROW(adamw_update(gp, gg, gm, gv, int64_t(n), 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 0), std::runtime_error);
}

TEST(CudaKernels, KernelsRunOnTheSelectedStream) {
  DD_REQUIRE_GPU();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  set_stream(s);
  EXPECT_EQ(stream(), s);
  const int64_t n = 1 << 20;
  const auto x = randu(static_cast<size_t>(n), 81), W = randu(64 * 64, 82);
  Dev<float> gx(x), gy(static_cast<size_t>(n)), gW(W), gz(64 * 64);
  relu_forward(gy, gx, n);
  gemm(false, false, 64, 64, 64, 1.f, gW, 64, gW, 64, 0.f, gz, 64);
  // Non-blocking stream: only a sync on s (not the default stream) orders the results before the copy.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  set_stream(nullptr);
  std::vector<float> y(static_cast<size_t>(n)), z(64 * 64);
  dd::ops::relu_forward(y.data(), x.data(), n);
  dd::ops::gemm(false, false, 64, 64, 64, 1.f, W.data(), 64, W.data(), 64, 0.f, z.data(), 64);
  EXPECT_EQ(gy.host(), y);
  EXPECT_TRUE(near(gz.host(), z, 1e-4));
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
}  // namespace dd::cuops::testing
