// dd::cuops Llama kernels (RMSNorm, RoPE, SwiGLU) against the CPU dd::ops reference (label gpu; skipped without a
// CUDA device). The CPU kernels are checked against double references and finite differences in tests/ops.
#include <tuple>

#include "core/ops/ops.h"
#include "tests/gpu/test_kernels_util.h"

namespace dd::cuops::testing {
namespace {

TEST(CudaKernels, RmsNormForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  for (auto [N, C] : {std::tuple<int64_t, int64_t>{128, 768}, {5, 7}, {3, 1000}, {1100, 45}}) {  // 1100: 5 chunks
    const size_t n = size_t(N * C);
    const auto x = randu(n, 1, -2.f, 2.f), w = randu(size_t(C), 2, 0.5f, 1.5f), dy = randu(n, 3);
    auto dw = randu(size_t(C), 4);
    std::vector<float> y(n), rstd(static_cast<size_t>(N)), dx(n);
    Dev<float> gx(x), gw(w), gdy(dy), gdw(dw), gy(n), grstd(static_cast<size_t>(N)), gdx(n);
    rmsnorm_forward(gy, grstd, gx, gw, N, C);
    rmsnorm_backward(gdx, gdw, gdy, gx, gw, grstd, N, C);
    dd::ops::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C);
    dd::ops::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
    const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C);
    EXPECT_TRUE(near(gy.host(), y, 1e-4)) << what << " y";
    EXPECT_TRUE(near(grstd.host(), rstd, 1e-4)) << what << " rstd";
    EXPECT_TRUE(near(gdx.host(), dx, 1e-3)) << what << " dx";
    EXPECT_TRUE(near(gdw.host(), dw, 1e-3)) << what << " dw";
  }
}

TEST(CudaKernels, RopeForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  // The llama preset's q|k inside a q|k|v row (24 heads of 64 in a row of 3*768), and an odd small shape.
  for (auto [B, T, NH, hd, ld] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{2, 128, 24, 64, 2304},
                                  {1, 5, 3, 6, 20}}) {
    const size_t n = size_t(B * T * ld);
    auto x = randu(n, 5), d = randu(n, 6);
    Dev<float> gx(x), gd(d);
    rope_forward(gx, B, T, NH, hd, ld);
    rope_backward(gd, B, T, NH, hd, ld);
    dd::ops::rope_forward(x.data(), B, T, NH, hd, ld);
    dd::ops::rope_backward(d.data(), B, T, NH, hd, ld);
    const std::string what = "T=" + std::to_string(T) + " NH=" + std::to_string(NH) + " hd=" + std::to_string(hd);
    EXPECT_TRUE(near(gx.host(), x, 1e-5)) << what << " forward";
    EXPECT_TRUE(near(gd.host(), d, 1e-5)) << what << " backward";
  }
}

TEST(CudaKernels, SwiGluForwardBackwardMatchCpu) {
  DD_REQUIRE_GPU();
  for (auto [N, F] : {std::tuple<int64_t, int64_t>{128, 2048}, {3, 5}}) {
    const size_t n = size_t(N * F);
    const auto gu = randu(2 * n, 7, -6.f, 6.f), dy = randu(n, 8);
    std::vector<float> y(n), dgu(2 * n);
    Dev<float> ggu(gu), gdy(dy), gy(n), gdgu(2 * n);
    swiglu_forward(gy, ggu, N, F);
    swiglu_backward(gdgu, gdy, ggu, N, F);
    dd::ops::swiglu_forward(y.data(), gu.data(), N, F);
    dd::ops::swiglu_backward(dgu.data(), dy.data(), gu.data(), N, F);
    EXPECT_TRUE(near(gy.host(), y, 1e-5)) << "F=" << F << " y";
    EXPECT_TRUE(near(gdgu.host(), dgu, 1e-5)) << "F=" << F << " dgu";
    swiglu_backward(ggu, gdy, ggu, N, F);  // in place
    EXPECT_TRUE(near(ggu.host(), dgu, 1e-5)) << "F=" << F << " dgu in place";
  }
}

}  // namespace
}  // namespace dd::cuops::testing
