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
  o.kind = "nccl";
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

TEST(TrainGpu, SignalPoliciesAreRefused) {
  SKIP_WITHOUT_GPU();
  auto c = base("cuda", "threshold", 2);
  try {
    dd::train::resolve_and_validate(c);
    FAIL() << "threshold accepted with --device cuda";
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("threshold"), std::string::npos) << e.what();
  }
}

}  // namespace
