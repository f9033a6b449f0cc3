// bench_gpu_step: median time of one training step (forward + backward + SGD update of every layer) of a
// reference model on the GPU, timed with CUDA events after warm-up. Prints a line per model and a JSON line.
//
//   bench_gpu_step [--model mlp|cnn|resnet20|gpt-mini] [--batch 64] [--warmup 10] [--iters 50]
//
// The step returns the loss to the host (as training does), so each step includes that one synchronization.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/models/cuda/gpu_model.h"
#include "core/ops/cuda/device_cuda.h"
#include "core/ops/cuda/ops_cuda.h"
#include "core/optim/optimizer.h"
#include "core/tensor/rng.h"

namespace {

using namespace dd;

struct Args {
  std::string model = "mlp";
  int64_t batch = 64;
  int warmup = 10, iters = 50;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) throw UsageError("option " + k + " needs a value");
    std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--batch") a.batch = std::stoll(v);
    else if (k == "--warmup") a.warmup = std::stoi(v);
    else if (k == "--iters") a.iters = std::stoi(v);
    else throw UsageError("unknown option " + k + " (expected --model, --batch, --warmup, --iters)");
  }
  if (a.batch <= 0 || a.warmup < 0 || a.iters <= 0) throw UsageError("--batch and --iters must be > 0");
  return a;
}

// The GEMM rate our kernels get (cuops::gemm: cuBLAS, plain FP32): the median of 10 products of 4096 x 4096
// matrices after 3 warm-ups, so a comparison can check that the peer's GEMM ran as fast (peer_gpu_step.py).
double gemm_gflops() {
  constexpr int64_t n = 4096;
  ops::Device& table = cuops::device();
  ops::DeviceFloats A(table, size_t(n * n)), B(table, size_t(n * n)), C(table, size_t(n * n));
  std::vector<float> h(size_t(n * n));
  Rng rng(3);
  for (auto& v : h) v = rng.uniform(-1.f, 1.f);
  table.copy_from_host(A.data(), h.data(), h.size() * 4);
  table.copy_from_host(B.data(), h.data(), h.size() * 4);
  cudaEvent_t t0, t1;
  DD_CUDA_CHECK(cudaEventCreate(&t0));
  DD_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    DD_CUDA_CHECK(cudaEventRecord(t0, cuops::stream()));
    cuops::gemm(false, false, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n);
    DD_CUDA_CHECK(cudaEventRecord(t1, cuops::stream()));
    DD_CUDA_CHECK(cudaEventSynchronize(t1));
    float e = 0;
    DD_CUDA_CHECK(cudaEventElapsedTime(&e, t0, t1));
    if (i >= 3) ms.push_back(e);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(ms.begin(), ms.end());
  return 2.0 * double(n) * n * n / (double(ms[ms.size() / 2]) * 1e-3) / 1e9;
}

int run(const Args& a) {
  if (!models::gpu::gpu_available()) throw UsageError("no CUDA device visible");
  auto cpu = models::make_model(a.model, 1);
  optim::OptimConfig oc;  // SGD, momentum 0.9: the PyTorch peer's optimizer
  models::gpu::GpuModel gm(*cpu);
  optim::Optimizer opt(oc, gm.model());

  // One fixed synthetic batch on the device (the peer also reuses one batch).
  Rng rng(7);
  int64_t per = 1;  // per-sample input: {T} tokens or a C x H x W image
  for (int64_t d : cpu->input_shape()) per *= d;
  const int64_t ny = a.batch * cpu->targets_per_sample();
  std::vector<float> hx(size_t(a.batch * per));
  std::vector<int32_t> htok(static_cast<size_t>(a.batch * per)), hy(static_cast<size_t>(ny));
  for (auto& v : hx) v = rng.normal();
  for (auto& v : htok) v = int32_t(rng.next() % uint64_t(cpu->num_classes()));
  for (auto& v : hy) v = int32_t(rng.next() % uint64_t(cpu->num_classes()));
  ops::Device& table = cuops::device();
  ops::DeviceFloats dx(table, hx.size());
  ops::DeviceArray<int32_t> dtok(table, htok.size()), dy(table, hy.size());
  table.copy_from_host(dx.data(), hx.data(), hx.size() * 4);
  table.copy_from_host(dtok.data(), htok.data(), htok.size() * 4);
  table.copy_from_host(dy.data(), hy.data(), hy.size() * 4);
  models::Input in;
  in.n = a.batch;
  in.y = dy.data();
  if (cpu->takes_tokens()) in.tokens = dtok.data();
  else in.x = dx.data();

  cudaEvent_t t0, t1;
  DD_CUDA_CHECK(cudaEventCreate(&t0));
  DD_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  float loss = 0;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    DD_CUDA_CHECK(cudaEventRecord(t0, cuops::stream()));
    loss = gm.forward(in, true).loss;
    gm.backward(nullptr, 1.0f);
    for (int l = gm.num_layers() - 1; l >= 0; --l) opt.update_layer(l, 0.01f);
    DD_CUDA_CHECK(cudaEventRecord(t1, cuops::stream()));
    DD_CUDA_CHECK(cudaEventSynchronize(t1));
    float e = 0;
    DD_CUDA_CHECK(cudaEventElapsedTime(&e, t0, t1));
    if (i >= a.warmup) ms.push_back(e);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(ms.begin(), ms.end());
  const float med = ms[ms.size() / 2], lo = ms.front(), p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
  cudaDeviceProp prop{};
  int dev = 0;
  DD_CUDA_CHECK(cudaGetDevice(&dev));
  DD_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("# bench_gpu_step: %s, model %s, batch %lld, %d warm-up + %d timed steps (CUDA events), "
              "SGD lr 0.01 momentum 0.9, final loss %.4f\n",
              prop.name, a.model.c_str(), (long long)a.batch, a.warmup, a.iters, loss);
  std::printf("%-10s %6s %10s %10s %10s\n", "model", "batch", "median_ms", "min_ms", "p90_ms");
  std::printf("%-10s %6lld %10.3f %10.3f %10.3f\n", a.model.c_str(), (long long)a.batch, med, lo, p90);
  const double gflops = gemm_gflops();
  std::printf("# cuBLAS FP32 GEMM 4096^3 (no TF32): %.0f GFLOP/s\n", gflops);
  std::printf("{\"bench\": \"gpu_step\", \"model\": \"%s\", \"batch\": %lld, \"iters\": %d, \"median_ms\": %.4f, "
              "\"min_ms\": %.4f, \"p90_ms\": %.4f, \"device\": \"%s\", \"gemm_gflops\": %.1f}\n",
              a.model.c_str(), (long long)a.batch, a.iters, med, lo, p90, prop.name, gflops);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const dd::UsageError& e) {
    std::fprintf(stderr, "bench_gpu_step: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_step: %s\n", e.what());
    return 1;
  }
}
