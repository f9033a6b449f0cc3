// dd::cuops against the CPU dd::ops reference (label gpu; skipped without a CUDA device): BatchNorm, pooling,
// LayerNorm, Embedding, causal attention, softmax cross-entropy.
#include <cmath>
#include <tuple>

#include "base/error.h"
#include "core/ops/ops.h"
#include "tests/gpu/test_kernels_util.h"

namespace dd::cuops::testing {
namespace {

TEST(CudaKernels, BatchNormTrainEvalBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  // The cnn's first BN (C=32 on 28x28), a BatchNorm1d-like HW=1 case, and an odd shape.
  for (auto [N, C, HW] : {std::tuple<int64_t, int64_t, int64_t>{4, 32, 784}, {8, 16, 1}, {3, 5, 49}}) {
    for (bool affine : {true, false}) {
      const size_t n = static_cast<size_t>(N * C * HW);
      const auto x = randu(n, 1, -2.f, 3.f), dy = randu(n, 2), gamma = randu(static_cast<size_t>(C), 3, 0.5f, 1.5f),
                 beta = randu(static_cast<size_t>(C), 4);
      auto rm = randu(static_cast<size_t>(C), 5), rv = randu(static_cast<size_t>(C), 6, 0.5f, 2.f);
      auto dgamma = randu(static_cast<size_t>(C), 7), dbeta = randu(static_cast<size_t>(C), 8);
      std::vector<float> y(n), dx(n), sm(static_cast<size_t>(C)), si(static_cast<size_t>(C)), ye(n);
      Dev<float> gx(x), gdy(dy), gg(gamma), gb(beta), grm(rm), grv(rv), gdg(dgamma), gdb(dbeta), gy(n), gdx(n),
          gsm(static_cast<size_t>(C)), gsi(static_cast<size_t>(C)), gye(n);
      const float* gp = affine ? gg.get() : nullptr;
      const float* bp = affine ? gb.get() : nullptr;
      batchnorm_forward_train(gy, gsm, gsi, grm, grv, gx, gp, bp, N, C, HW);
      batchnorm_backward(gdx, affine ? gdg.get() : nullptr, affine ? gdb.get() : nullptr, gdy, gx, gp, gsm, gsi, N, C,
                         HW);
      batchnorm_forward_eval(gye, gx, gp, bp, grm, grv, N, C, HW);
      const float* cg = affine ? gamma.data() : nullptr;
      const float* cb = affine ? beta.data() : nullptr;
      dd::ops::batchnorm_forward_train(y.data(), sm.data(), si.data(), rm.data(), rv.data(), x.data(), cg, cb, N, C,
                                       HW);
      dd::ops::batchnorm_backward(dx.data(), affine ? dgamma.data() : nullptr, affine ? dbeta.data() : nullptr,
                                  dy.data(), x.data(), cg, sm.data(), si.data(), N, C, HW);
      dd::ops::batchnorm_forward_eval(ye.data(), x.data(), cg, cb, rm.data(), rv.data(), N, C, HW);
      const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " HW=" + std::to_string(HW) +
                               " affine=" + std::to_string(affine);
      EXPECT_TRUE(near(gy.host(), y, 1e-4)) << what << " y";
      EXPECT_TRUE(near(gsm.host(), sm, 1e-4)) << what << " save_mean";
      EXPECT_TRUE(near(gsi.host(), si, 1e-4)) << what << " save_invstd";
      EXPECT_TRUE(near(grm.host(), rm, 1e-4)) << what << " running_mean";
      EXPECT_TRUE(near(grv.host(), rv, 1e-4)) << what << " running_var (unbiased)";
      EXPECT_TRUE(near(gye.host(), ye, 1e-4)) << what << " eval y";
      EXPECT_TRUE(near(gdx.host(), dx, 1e-3)) << what << " dx";
      EXPECT_TRUE(near(gdg.host(), dgamma, 1e-3)) << what << " dgamma";
      EXPECT_TRUE(near(gdb.host(), dbeta, 1e-3)) << what << " dbeta";
    }
  }
  Dev<float> one(4);
  EXPECT_THROW(batchnorm_forward_train(one, nullptr, nullptr, nullptr, nullptr, one, nullptr, nullptr, 1, 4, 1),
               dd::UsageError);
}

TEST(CudaKernels, MaxPoolMatchesCpuIncludingTiesAndOddSizes) {
  DD_REQUIRE_GPU();
  for (auto [N, C, H, W] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 32, 28, 28}, {1, 3, 7, 9}}) {
    const size_t n = static_cast<size_t>(N * C * H * W), no = static_cast<size_t>(N * C * (H / 2) * (W / 2));
    // Values on a coarse grid so windows have ties; the first maximum (window order 0 1 / 2 3) must win.
    auto x = randu(n, 11);
    for (auto& v : x) v = std::round(v * 2.f) / 2.f;
    const auto dy = randu(no, 12);
    std::vector<float> y(no), dx(n);
    std::vector<uint8_t> idx(no);
    Dev<float> gx(x), gdy(dy), gy(no), gdx(n);
    Dev<uint8_t> gidx(no);
    // Poison dx: the backward must overwrite every element, including the unpooled odd row/column.
    Dev<float> poison(std::vector<float>(n, 7.f));
    maxpool2_forward(gy, gidx, gx, N, C, H, W);
    maxpool2_backward(poison, gdy, gidx, N, C, H, W);
    dd::ops::maxpool2_forward(y.data(), idx.data(), x.data(), N, C, H, W);
    dd::ops::maxpool2_backward(dx.data(), dy.data(), idx.data(), N, C, H, W);
    EXPECT_EQ(gy.host(), y) << "H=" << H << " W=" << W;
    EXPECT_EQ(gidx.host(), idx) << "argmax indices";
    EXPECT_EQ(poison.host(), dx) << "backward";
  }
}

// The ResNet stem's 3x3 stride-2 pad-1 pool (and two other geometries): same values, argmax and gradient as the
// CPU kernel, with ties on a coarse grid, all-negative planes (padding must not win) and overlapping windows
// sharing an argmax (their gradients add).
TEST(CudaKernels, MaxPoolKMatchesCpuIncludingTiesAndPadding) {
  DD_REQUIRE_GPU();
  struct G { int64_t N, C, H, W, k, s, p; };
  for (const G& g : {G{2, 64, 16, 16, 3, 2, 1}, G{1, 3, 7, 9, 3, 2, 1}, G{2, 2, 1, 2, 3, 2, 1}, G{1, 4, 6, 5, 3, 1, 0}}) {
    const int64_t Ho = (g.H + 2 * g.p - g.k) / g.s + 1, Wo = (g.W + 2 * g.p - g.k) / g.s + 1;
    const size_t n = static_cast<size_t>(g.N * g.C * g.H * g.W), no = static_cast<size_t>(g.N * g.C * Ho * Wo);
    auto x = randu(n, 13, -2.f, 1.f);
    for (auto& v : x) v = std::round(v * 2.f) / 2.f;  // ties, and planes that are mostly negative
    const auto dy = randu(no, 14);
    std::vector<float> y(no), dx(n);
    std::vector<int32_t> idx(no);
    Dev<float> gx(x), gdy(dy), gy(no);
    Dev<int32_t> gidx(no);
    Dev<float> poison(std::vector<float>(n, 7.f));  // the backward overwrites every element
    maxpool_forward(gy, gidx, gx, g.N, g.C, g.H, g.W, g.k, g.s, g.p);
    maxpool_backward(poison, gdy, gidx, g.N, g.C, g.H, g.W, g.k, g.s, g.p);
    dd::ops::maxpool_forward(y.data(), idx.data(), x.data(), g.N, g.C, g.H, g.W, g.k, g.s, g.p);
    dd::ops::maxpool_backward(dx.data(), dy.data(), idx.data(), g.N, g.C, g.H, g.W, g.k, g.s, g.p);
    const std::string what = "H=" + std::to_string(g.H) + " W=" + std::to_string(g.W) + " k=" + std::to_string(g.k);
    EXPECT_EQ(gy.host(), y) << what;
    EXPECT_EQ(gidx.host(), idx) << what << " argmax";
    // Sums of at most four dy values in a different order: within a few float roundings.
    EXPECT_TRUE(near(poison.host(), dx, 1e-6)) << what << " backward";
  }
}

TEST(CudaKernels, GlobalAvgPoolMatchesCpu) {
  DD_REQUIRE_GPU();
  for (auto [N, C, HW] : {std::tuple<int64_t, int64_t, int64_t>{4, 64, 49}, {3, 5, 1}}) {
    const size_t n = static_cast<size_t>(N * C * HW), no = static_cast<size_t>(N * C);
    const auto x = randu(n, 21), dy = randu(no, 22);
    std::vector<float> y(no), dx(n);
    Dev<float> gx(x), gdy(dy), gy(no), gdx(n);
    avgpool_global_forward(gy, gx, N, C, HW);
    avgpool_global_backward(gdx, gdy, N, C, HW);
    dd::ops::avgpool_global_forward(y.data(), x.data(), N, C, HW);
    dd::ops::avgpool_global_backward(dx.data(), dy.data(), N, C, HW);
    EXPECT_TRUE(near(gy.host(), y, 1e-5)) << "HW=" << HW;
    EXPECT_TRUE(near(gdx.host(), dx, 1e-6)) << "backward";
  }
}

TEST(CudaKernels, LayerNormForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  for (auto [N, C] : {std::tuple<int64_t, int64_t>{32, 256}, {5, 37}, {3, 1000}, {1100, 45}}) {  // 1100: 5 chunks
    const size_t n = static_cast<size_t>(N * C);
    const auto x = randu(n, 31, -2.f, 2.f), dy = randu(n, 32), w = randu(static_cast<size_t>(C), 33, 0.5f, 1.5f),
               b = randu(static_cast<size_t>(C), 34);
    auto dw = randu(static_cast<size_t>(C), 35), db = randu(static_cast<size_t>(C), 36);
    std::vector<float> y(n), dx(n), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
    Dev<float> gx(x), gdy(dy), gw(w), gb(b), gdw(dw), gdb(db), gy(n), gdx(n), gmean(static_cast<size_t>(N)),
        grstd(static_cast<size_t>(N));
    layernorm_forward(gy, gmean, grstd, gx, gw, gb, N, C);
    layernorm_backward(gdx, gdw, gdb, gdy, gx, gw, gmean, grstd, N, C);
    dd::ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    dd::ops::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
    EXPECT_TRUE(near(gy.host(), y, 1e-4)) << "N=" << N << " C=" << C << " y";
    EXPECT_TRUE(near(gmean.host(), mean, 1e-4)) << "mean";
    EXPECT_TRUE(near(grstd.host(), rstd, 1e-4)) << "rstd";
    EXPECT_TRUE(near(gdx.host(), dx, 1e-3)) << "dx";
    EXPECT_TRUE(near(gdw.host(), dw, 1e-3)) << "dw";
    EXPECT_TRUE(near(gdb.host(), db, 1e-3)) << "db";
    // dx not needed: parameter grads only.
    layernorm_backward(nullptr, gdw, gdb, gdy, gx, gw, gmean, grstd, N, C);
    dd::ops::layernorm_backward(nullptr, dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                                N, C);
    EXPECT_TRUE(near(gdw.host(), dw, 1e-3)) << "dw (null dx)";
  }
}

TEST(CudaKernels, EmbeddingForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  const int64_t V = 256, C = 64, N = 2 * 128;
  const auto idx = randi(static_cast<size_t>(N), 41, 0, 20);  // a small range, so rows repeat and atomics collide
  const auto W = randu(static_cast<size_t>(V * C), 42), dy = randu(static_cast<size_t>(N * C), 43);
  auto dW = randu(static_cast<size_t>(V * C), 44);
  std::vector<float> y(static_cast<size_t>(N * C));
  Dev<int32_t> gidx(idx);
  Dev<float> gW(W), gdy(dy), gdW(dW), gy(y.size());
  embedding_forward(gy, gidx, gW, N, C);
  embedding_backward(gdW, gdy, gidx, N, C);
  dd::ops::embedding_forward(y.data(), idx.data(), W.data(), N, C);
  dd::ops::embedding_backward(dW.data(), dy.data(), idx.data(), N, C);
  EXPECT_EQ(gy.host(), y);
  EXPECT_TRUE(near(gdW.host(), dW, 1e-5));
}

TEST(CudaKernels, CausalAttentionForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  // The brief's small shape and the gpt-mini block shape (T=128, C=256, 4 heads).
  for (auto [B, T, C, NH] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 16, 64, 4}, {1, 128, 256, 4}, {3, 5, 12, 3}}) {
    const size_t nqkv = static_cast<size_t>(B * T * 3 * C), nout = static_cast<size_t>(B * T * C),
                 natt = static_cast<size_t>(B * NH * T * T);
    const auto qkv = randu(nqkv, 51, -2.f, 2.f), dout = randu(nout, 52);
    std::vector<float> out(nout), att(natt), dqkv(nqkv),
        scratch(static_cast<size_t>(dd::ops::attention_scratch_floats(B, T, C, NH)));
    ASSERT_EQ(attention_scratch_floats(B, T, C, NH), dd::ops::attention_scratch_floats(B, T, C, NH));
    Dev<float> gqkv(qkv), gdout(dout), gout(nout), gdqkv(std::vector<float>(nqkv, 7.f)), gscratch(scratch.size());
    // Poison att: the forward must write the zeros above the diagonal itself.
    Dev<float> gatt(std::vector<float>(natt, 7.f));
    attention_forward(gout, gatt, gqkv, B, T, C, NH);
    attention_backward(gdqkv, gscratch, gdout, gqkv, gatt, B, T, C, NH);
    dd::ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    dd::ops::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    const std::string what =
        "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH);
    EXPECT_TRUE(near(gatt.host(), att, 1e-4)) << what << " att";
    EXPECT_TRUE(near(gout.host(), out, 1e-4)) << what << " out";
    EXPECT_TRUE(near(gdqkv.host(), dqkv, 1e-3)) << what << " dqkv";
  }
}

TEST(CudaKernels, SoftmaxXentMatchesCpu) {
  DD_REQUIRE_GPU();
  for (auto [N, V] : {std::tuple<int64_t, int64_t>{64, 10}, {256, 256}, {3, 1000}}) {
    auto logits = randu(static_cast<size_t>(N * V), 61, -5.f, 5.f);
    const auto tg = randi(static_cast<size_t>(N), 62, 0, int32_t(V - 1));
    // Make some rows' argmax the target, so the hit count is neither 0 nor N.
    for (int64_t n = 0; n < N; n += 3) logits[static_cast<size_t>(n * V + tg[static_cast<size_t>(n)])] = 9.f;
    std::vector<float> probs(static_cast<size_t>(N * V)), dl(static_cast<size_t>(N * V));
    Dev<float> glog(logits), gprobs(probs.size()), gdl(dl.size());
    Dev<int32_t> gtg(tg);
    int64_t hits_gpu = -1, hits_cpu = -2;
    const float loss_gpu = softmax_xent_forward(gprobs, glog, gtg, N, V, &hits_gpu);
    const float loss_cpu = dd::ops::softmax_xent_forward(probs.data(), logits.data(), tg.data(), N, V, &hits_cpu);
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * (1.0 + std::fabs(loss_cpu))) << "N=" << N << " V=" << V;
    EXPECT_EQ(hits_gpu, hits_cpu);
    EXPECT_TRUE(near(gprobs.host(), probs, 1e-4)) << "probs";
    softmax_xent_backward(gdl, gprobs, gtg, N, V, 1.f / float(N));
    dd::ops::softmax_xent_backward(dl.data(), probs.data(), tg.data(), N, V, 1.f / float(N));
    EXPECT_TRUE(near(gdl.host(), dl, 1e-4)) << "dlogits";
    // Without `correct`, the same loss.
    EXPECT_FLOAT_EQ(softmax_xent_forward(gprobs, glog, gtg, N, V), loss_gpu);
  }
  // A target outside [0, V) is a usage error naming the row, as on the CPU.
  Dev<float> glog(randu(20, 63)), gprobs(20);
  Dev<int32_t> bad(std::vector<int32_t>{1, 2, 10, 3});
  try {
    softmax_xent_forward(gprobs, glog, bad, 4, 5);
    ADD_FAILURE() << "no exception for target 10 with V=5";
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("row 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dd::cuops::testing
