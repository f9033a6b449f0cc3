// --device cuda training vs the CPU path: 1 rank, the CPU-GPU hybrid (2 ranks as threads over Gloo, staged
// through pinned memory) and NCCL (1 rank: NCCL refuses two ranks of one communicator on one GPU). Each test
// skips itself where no CUDA device is visible.
#include <gtest/gtest.h>
#include <gloo/rendezvous/hash_store.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/gloo/gloo_backend.h"
#include "base/error.h"
#include "core/models/cuda/gpu_model.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"
#include "tests/common/tmp_dir.h"

namespace {

using dd::train::TrainConfig;

#define SKIP_WITHOUT_GPU() \
  if (!dd::models::gpu::gpu_available()) GTEST_SKIP() << "no CUDA device visible"

TrainConfig base(const std::string& device, const std::string& policy, int64_t steps) {
  TrainConfig c;
  c.model = "mlp";
  c.data = "synthetic";
  c.device = dd::train::parse_device(device);
  c.policy = policy;
  c.batch = 32;
  c.steps = steps;
  c.lr = 0.05f;
  c.lr_schedule = dd::train::LrSchedule::Const;
  c.warmup = 0;
  c.eval_samples = 200;
  c.seed = 7;
  c.threads = 1;
  c.first_bucket_mb = 1;
  c.bucket_cap_mb = 4;  // mlp: several buckets per step
  return c;
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> v(s.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), s.data(), 4 * v.size());
  return v;
}

// Largest |a-b| / (1e-3 + |b|) over the parameters; also asserts equal length.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / (1e-3 + std::fabs(double(b[i]))));
  return worst;
}

// Euclidean norm of a - b.
double l2_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double s = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s);
}

// One process, no backend.
std::vector<float> train_single(TrainConfig c, const std::string& file) {
  c.save_params = file;
  dd::train::resolve_and_validate(c);
  dd::train::Trainer t(c, nullptr);
  auto s = t.run();
  EXPECT_TRUE(std::isfinite(s["final_loss"].get<double>()));
  return read_floats(file);
}

// `world` ranks as threads over one Gloo HashStore; returns every rank's --save-params.
std::vector<std::vector<float>> train_threads(TrainConfig c, int world, const std::string& dir) {
  static std::atomic<int> job{0};
  const std::string prefix = "gpu-train-" + std::to_string(job++);
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<std::exception_ptr> err(world);
  std::vector<std::thread> th;
  for (int r = 0; r < world; ++r)
    th.emplace_back([&, r] {
      try {
        TrainConfig rc = c;
        rc.rank = r;
        rc.world = world;
        rc.local_rank = 0;  // one GPU: every rank on device 0
        rc.local_world = world;
        rc.save_params = dir + "/params-%r.bin";
        dd::train::resolve_and_validate(rc);
        dd::BackendOptions o;
        o.rank = r;
        o.world = world;
        o.timeout_s = 60;
        o.prefix = prefix;
        auto b = dd::make_gloo_backend(r, world, store, o);
        dd::train::Trainer t(rc, b.get());
        t.run();
        b->barrier();
      } catch (...) {
        err[r] = std::current_exception();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < world; ++r) out.push_back(read_floats(dir + "/params-" + std::to_string(r) + ".bin"));
  return out;
}

TEST(TrainGpu, OneRankMatchesCpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto cpu = train_single(base("cpu", "ddp", 10), dir / "cpu.bin");
  auto gpu = train_single(base("cuda", "ddp", 10), dir / "gpu.bin");
  ASSERT_EQ(cpu.size(), 2913290u);
  EXPECT_LT(max_rel_diff(gpu, cpu), 2e-3);
  // The run moved the parameters (a test that would pass on an untrained model proves nothing).
  auto init = train_single(base("cpu", "ddp", 1), dir / "init.bin");
  EXPECT_GT(max_rel_diff(cpu, init), 1e-2);
}

TEST(TrainGpu, AdamWOneRankMatchesCpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto c = base("cpu", "ddp", 6);
  c.optimizer = dd::train::OptimizerKind::AdamW;
  c.lr = 1e-3f;
  auto cpu = train_single(c, dir / "cpu.bin");
  c.device = dd::train::Device::Cuda;
  auto gpu = train_single(c, dir / "gpu.bin");
  // Not element by element: AdamW moves each parameter by about lr per step whatever its gradient's size, so a
  // parameter whose gradient is near zero can step either way on the two sides (rounding decides m's sign).
  // Those are few: in norm, the two runs differ by a small part of how far the parameters moved.
  auto init_c = c;
  init_c.device = dd::train::Device::Cpu;
  init_c.steps = 1;
  auto init = train_single(init_c, dir / "init.bin");
  EXPECT_LT(l2_diff(gpu, cpu) / l2_diff(cpu, init), 1e-2);
}

// An AdamW checkpoint resumes on the GPU: the device runs the host's optim::Optimizer, whose state and per-layer
// step counters travel with the checkpoint, so 3 steps + a resume to 6 end where 6 uninterrupted steps end (with
// counters restarted at 1 the bias corrections of steps 3-5 would differ by far more than the bound).
TEST(TrainGpu, AdamWResumeMatchesUninterrupted) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto c = base("cuda", "ddp", 6);
  c.optimizer = dd::train::OptimizerKind::AdamW;
  c.lr = 1e-3f;
  auto ref = train_single(c, dir / "ref.bin");
  auto first = c;
  first.steps = 3;
  first.checkpoint_every = 3;  // a checkpoint after step 2
  first.out = dir / "run";
  dd::train::prepare_run_dir(first.out, false, true);
  auto part = train_single(first, dir / "first.bin");
  auto r = c;
  r.resume = first.out;
  r.out = first.out;
  auto res = train_single(r, dir / "res.bin");
  EXPECT_GT(max_rel_diff(ref, part), 1e-4);  // steps 3-5 moved the parameters
  EXPECT_LT(max_rel_diff(res, ref), 1e-5);
}

// The CPU-GPU hybrid: Gloo on pinned host copies of the device buckets.
class HybridPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridPolicy, TwoRanksGlooMatchCpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  const std::string policy = GetParam();
  std::filesystem::create_directories(dir / "cpu");
  std::filesystem::create_directories(dir / "gpu");
  auto cpu = train_threads(base("cpu", policy, 8), 2, dir / "cpu");
  auto gpu = train_threads(base("cuda", policy, 8), 2, dir / "gpu");
  // The final model is the consensus: every rank holds the same bits.
  EXPECT_EQ(gpu[0], gpu[1]);
  EXPECT_EQ(cpu[0], cpu[1]);
  EXPECT_LT(max_rel_diff(gpu[0], cpu[0]), 2e-3) << policy;
}

INSTANTIATE_TEST_SUITE_P(Hybrid, HybridPolicy, ::testing::Values("ddp", "localsgd:k=3", "plsgd:h=2"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find(':'));
                           return n;
                         });

// dreamddp's schedule comes from this machine's measured times (GPU vs CPU differ), so the check is that the
// self-profiling steps (synchronized ready times) run and the ranks end on the same consensus.
TEST(TrainGpu, DreamddpHybridRanksAgree) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto gpu = train_threads(base("cuda", "dreamddp:h=2,profile_steps=3", 8), 2, dir.path);
  ASSERT_EQ(gpu[0].size(), 2913290u);
  EXPECT_EQ(gpu[0], gpu[1]);
  for (float x : gpu[0]) ASSERT_TRUE(std::isfinite(x));
}

TEST(TrainGpu, NcclOneRankMatchesCpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto cpu = train_single(base("cpu", "ddp", 10), dir / "cpu.bin");
  auto c = base("cuda", "ddp", 10);
  c.backend = dd::train::BackendKind::Nccl;
  c.save_params = dir / "nccl.bin";
  dd::train::resolve_and_validate(c);
  dd::BackendOptions o;
  o.kind = dd::BackendKind::Nccl;
  o.rendezvous = "file://" + (dir / "rdv");
  o.prefix = "gpu-train-nccl";
  o.timeout_s = 60;
  std::filesystem::create_directories(dir / "rdv");
  auto b = dd::make_backend(o);
  ASSERT_EQ(b->name(), "nccl");
  {
    dd::train::Trainer t(c, b.get());
    t.run();
  }
  EXPECT_LT(max_rel_diff(read_floats(dir / "nccl.bin"), cpu), 2e-3);
}

// Delayed merges and the outer optimizer run on device copies of the averaged layers (core/ops arena kernels):
// decisions do not depend on the data, so the trajectory matches the CPU's as the plain policies do.
INSTANTIATE_TEST_SUITE_P(Merges, HybridPolicy,
                         ::testing::Values("localsgd:k=3,delay=2", "plsgd:h=2,outer=nesterov:lr=0.7,momentum=0.9",
                                           "localsgd:k=3,outer=nesterov"),
                         [](const auto& info) {
                           std::string n = info.param.find("delay") != std::string::npos ? "delay" : "outer";
                           return n + std::to_string(info.index);
                         });

// The policies that read gradient signals take them on the device (norms and cosines by dot3, only the sums come
// back). Their decisions follow thresholds on those numbers, which rounding can tip either way between the CPU
// and the GPU, so the check is that the signal steps run and the ranks end on the same consensus.
class SignalPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(SignalPolicy, RanksAgreeOnTheGpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto gpu = train_threads(base("cuda", GetParam(), 8), 2, dir.path);
  ASSERT_EQ(gpu[0].size(), 2913290u);
  EXPECT_EQ(gpu[0], gpu[1]);
  for (float x : gpu[0]) ASSERT_TRUE(std::isfinite(x));
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalPolicy, ::testing::Values("threshold", "hybrid:t=4", "autothreshold"),
                         [](const auto& info) { return info.param.substr(0, info.param.find(':')); });

// The sensitivity probe on the GPU model against the same probe on the CPU model: one rank, probes at steps 0 and 6
// with delays 1 and 2, the cosines read back from metrics.h5. A cosine moves by at most about twice the relative
// error of the two gradients it compares; the GPU model's gradients are within 1e-4 of the CPU's relative to their
// norm after a few steps of mlp (test_models.cpp), so 1e-3 bounds the difference with room for the trajectories'
// own few-step drift.
TEST(TrainGpu, SensitivityProbeMatchesCpu) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  for (const char* dev : {"cpu", "cuda"}) {
    auto c = base(dev, "ddp", 10);
    c.sensitivity = "delays=1/2,every=6,batch=128";
    c.out = dir / dev;
    dd::train::prepare_run_dir(c.out, false, true);
    train_single(c, dir / (std::string(dev) + ".bin"));
  }
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "a = h5py.File(sys.argv[1], 'r')['sensitivity/cosine'][:]\n"
      "b = h5py.File(sys.argv[2], 'r')['sensitivity/cosine'][:]\n"
      "assert a.shape == b.shape and a.shape[0] == 2, (a.shape, b.shape)\n"
      "assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))\n"
      "d = float(np.max(np.abs(a - b)))\n"
      "print('largest cosine difference', d)\n"
      "sys.exit(0 if d < 1e-3 else 1)\n";
  const std::string py = dir / "cmp.py";
  std::ofstream(py) << script;
  const std::string cmd = "/usr/bin/python3 " + py + " " + (dir / "cpu") + "/metrics.h5 " + (dir / "cuda") +
                          "/metrics.h5";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// The anomaly guard checks gradients on the device: a NaN batch on rank 0 at step 3 is caught there, the layer
// is not updated, and the ranks fall back to lock-step together.
TEST(TrainGpu, AnomalyGuardOnTheDevice) {
  SKIP_WITHOUT_GPU();
  dd::testing_common::TmpDir dir("dd-train-gpu");
  auto c = base("cuda", "localsgd:k=4", 10);
  c.anomaly = dd::train::AnomalyMode::Fallback;
  c.inject_nan = 3;
  auto gpu = train_threads(c, 2, dir.path);
  EXPECT_EQ(gpu[0], gpu[1]);
  for (float x : gpu[0]) ASSERT_TRUE(std::isfinite(x));
}

// compress=: the payload is made on the device, staged to the host where the codec encodes and exchanges it (in
// the data path's queue, behind the buckets before it), and the average copied back. Quantization rounds the
// CPU's and the GPU's payloads (equal to rounding) to codes that can differ by one step, so the check is that the
// ranks end on the same consensus.
INSTANTIATE_TEST_SUITE_P(Compress, SignalPolicy,
                         ::testing::Values("plsgd:h=2,compress=int8", "localsgd:k=3,compress=bf16,outer=nesterov",
                                           "plsgd:h=2,compress=topk:p=5"),
                         [](const auto& info) { return "compress" + std::to_string(info.index); });

}  // namespace
