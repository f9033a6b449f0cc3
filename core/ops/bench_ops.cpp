// bench_ops: median ms per forward+backward of the kernels at the sizes of the mlp/cnn/resnet20/gpt-mini models.
// Usage: bench_ops [threads=1] [iters=20]. Conv layout is chosen by DD_CONV_LAYOUT (any|plain). Last line: JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/ops/ops.h"

using namespace dd::ops;

namespace {
int g_iters = 20;
std::vector<std::pair<std::string, double>> g_rows;

std::vector<float> randv(int64_t n, unsigned seed) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(r);
  return v;
}

// Two warm-up runs (builds cached primitives), then the median of g_iters timed runs.
void bench(const std::string& name, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> t;
  for (int i = 0; i < g_iters; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  double med = t[t.size() / 2];
  std::printf("%-44s %9.3f ms\n", name.c_str(), med);
  g_rows.emplace_back(name, med);
}

void bench_conv(int64_t N, int64_t C, int64_t OC, int64_t H, int64_t k, int64_t s, int64_t p, bool need_dx) {
  Conv2d conv(C, OC, k, s, p);
  int64_t Ho = conv.out_h(H);
  auto x = randv(N * C * H * H, 1), w = randv(OC * C * k * k, 2), dy = randv(N * OC * Ho * Ho, 3);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
  char nm[128];
  std::snprintf(nm, sizeof nm, "conv%ldx%ld s%ld %ld->%ld @%ld N=%ld%s", (long)k, (long)k, (long)s, (long)C,
                (long)OC, (long)H, (long)N, need_dx ? "" : " (no dx)");
  bench(std::string(nm) + " fwd", [&] { conv.forward(y.data(), x.data(), w.data(), N, H, H); });
  bench(std::string(nm) + " fwd+bwd", [&] {
    conv.forward(y.data(), x.data(), w.data(), N, H, H);
    conv.backward(need_dx ? dx.data() : nullptr, dw.data(), dy.data(), x.data(), w.data(), N, H, H);
  });
}

void bench_bn(int64_t N, int64_t C, int64_t HW) {
  auto x = randv(N * C * HW, 4), dy = randv(N * C * HW, 5);
  std::vector<float> y(x.size()), dx(x.size()), g(C, 1.f), b(C, 0.f), dg(C), db(C), sm(C), si(C), rm(C), rv(C, 1.f);
  char nm[96];
  std::snprintf(nm, sizeof nm, "batchnorm C=%ld HW=%ld N=%ld fwd+bwd", (long)C, (long)HW, (long)N);
  bench(nm, [&] {
    batchnorm_forward_train(y.data(), sm.data(), si.data(), rm.data(), rv.data(), x.data(), g.data(), b.data(), N,
                            C, HW);
    batchnorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(), sm.data(), si.data(), N, C,
                       HW);
  });
}

void bench_linear(int64_t N, int64_t in, int64_t out) {
  auto x = randv(N * in, 6), W = randv(out * in, 7), b = randv(out, 8), dy = randv(N * out, 9);
  std::vector<float> y(N * out), dx(x.size()), dW(W.size()), db(out);
  char nm[96];
  std::snprintf(nm, sizeof nm, "linear %ld->%ld N=%ld fwd+bwd", (long)in, (long)out, (long)N);
  bench(nm, [&] {
    linear_forward(y.data(), x.data(), W.data(), b.data(), N, in, out);
    linear_backward(dx.data(), dW.data(), db.data(), dy.data(), x.data(), W.data(), N, in, out);
  });
}

// cnn (batch 64): its convolutions, batch norms, max-pool and ReLU.
void bench_cnn() {
  bench_conv(64, 1, 32, 28, 3, 1, 1, false);
  bench_conv(64, 32, 64, 28, 3, 1, 1, true);
  bench_conv(64, 64, 128, 14, 3, 1, 1, true);
  bench_bn(64, 32, 784);
  bench_bn(64, 64, 784);
  bench_bn(64, 128, 196);
  int64_t N = 64, C = 64, H = 28;
  auto x = randv(N * C * H * H, 10), dy = randv(N * C * H * H / 4, 11);
  std::vector<float> y(dy.size()), dx(x.size());
  std::vector<uint8_t> idx(dy.size());
  bench("maxpool2 C=64 @28 N=64 fwd+bwd", [&] {
    maxpool2_forward(y.data(), idx.data(), x.data(), N, C, H, H);
    maxpool2_backward(dx.data(), dy.data(), idx.data(), N, C, H, H);
  });
  std::vector<float> r(x.size());
  bench("relu 64x64x28x28 fwd+bwd", [&] {
    relu_forward(r.data(), x.data(), (int64_t)x.size());
    relu_backward(dx.data(), x.data(), r.data(), (int64_t)x.size());
  });
}

// resnet20 (batch 64; stem 1 channel, 1x1 stride-2 projection shortcuts)
void bench_resnet20() {
  bench_conv(64, 1, 16, 28, 3, 1, 1, false);
  bench_conv(64, 16, 16, 28, 3, 1, 1, true);
  bench_conv(64, 16, 32, 28, 3, 2, 1, true);
  bench_conv(64, 16, 32, 28, 1, 2, 0, true);
  bench_conv(64, 32, 32, 14, 3, 1, 1, true);
  bench_conv(64, 32, 64, 14, 3, 2, 1, true);
  bench_conv(64, 64, 64, 7, 3, 1, 1, true);
  bench_bn(64, 16, 784);
}

// mlp (batch 64)
void bench_mlp() {
  bench_linear(64, 784, 1024);
  bench_linear(64, 1024, 1024);
  bench_linear(64, 1024, 10);
}

// gpt-mini: B=8, T=128, C=256, NH=4, V=256
void bench_gpt_mini() {
  int64_t B = 8, T = 128, C = 256, NH = 4, V = 256, N = B * T;
  auto qkv = randv(N * 3 * C, 12), dout = randv(N * C, 13);
  std::vector<float> out(N * C), att(B * NH * T * T), dqkv(qkv.size()),
      scratch(attention_scratch_floats(B, T, C, NH));
  bench("attention B=8 T=128 C=256 NH=4 fwd+bwd", [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  });
  bench_linear(N, C, 3 * C);
  bench_linear(N, C, C);
  bench_linear(N, C, 4 * C);
  bench_linear(N, 4 * C, C);
  auto g = randv(N * 4 * C, 14), dg = randv(N * 4 * C, 15);
  std::vector<float> gy(g.size()), gdx(g.size());
  bench("gelu [1024,1024] fwd+bwd", [&] {
    gelu_forward(gy.data(), g.data(), (int64_t)g.size());
    gelu_backward(gdx.data(), dg.data(), g.data(), (int64_t)g.size());
  });
  auto x = randv(N * C, 16), w = randv(C, 17), b = randv(C, 18);
  std::vector<float> y(x.size()), dx(x.size()), dw(C), db(C), mean(N), rstd(N);
  bench("layernorm [1024,256] fwd+bwd", [&] {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), N, C);
  });
  std::vector<int32_t> tg(N);
  for (int64_t i = 0; i < N; ++i) tg[i] = static_cast<int32_t>((i * 37) % V);
  std::vector<float> probs(N * V), dl(N * V);
  bench("softmax_xent [1024,256] fwd+bwd", [&] {
    softmax_xent_forward(probs.data(), x.data(), tg.data(), N, V);
    softmax_xent_backward(dl.data(), probs.data(), tg.data(), N, V, 1.f / N);
  });
}

// The one-thread GEMM rate the issue measures (mlp fc2 forward), and the optimizer over the mlp's parameters.
void bench_gemm_and_optimizers() {
  int64_t M = 64, K = 1024, N = 1024;
  auto A = randv(M * K, 19), W = randv(N * K, 20);
  std::vector<float> C(M * N);
  bench("gemm 64x1024x1024 (x W^T) fwd", [&] {
    gemm(false, true, M, N, K, 1.f, A.data(), K, W.data(), K, 0.f, C.data(), N);
  });
  const int64_t P = 2913290;
  auto p = randv(P, 21);
  std::vector<float> g(P), m(P), v(P);
  bench("sgd momentum update P=2913290", [&] {
    sgd_step(p.data(), g.data(), m.data(), P, 0.01f, 0.9f, 0.f, false);
  });
  bench("adamw update P=2913290", [&] {
    adamw_step(p.data(), g.data(), m.data(), v.data(), P, 0.9f, 0.999f, 1e-8f, 1e-3f, 1.f, 1.f - 1e-5f);
  });
}

// The last line: every row as JSON.
void print_json(const char* lay) {
  std::printf("{\"bench\":\"ops\",\"threads\":%d,\"iters\":%d,\"conv_layout\":\"%s\",\"ms\":{", threads(), g_iters,
              lay ? lay : "any");
  for (size_t i = 0; i < g_rows.size(); ++i)
    std::printf("%s\"%s\":%.4f", i ? "," : "", g_rows[i].first.c_str(), g_rows[i].second);
  std::printf("}}\n");
}
}  // namespace

int main(int argc, char** argv) {
  int th = argc > 1 ? std::atoi(argv[1]) : 1;
  if (argc > 2) g_iters = std::max(1, std::atoi(argv[2]));
  set_threads(th);
  const char* lay = std::getenv("DD_CONV_LAYOUT");
  std::printf("bench_ops: threads=%d iters=%d (median), conv layout=%s\n", threads(), g_iters, lay ? lay : "any");
  bench_cnn();
  bench_resnet20();
  bench_mlp();
  bench_gpt_mini();
  bench_gemm_and_optimizers();
  print_json(lay);
  return 0;
}
