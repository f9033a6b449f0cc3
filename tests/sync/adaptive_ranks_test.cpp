// The adaptive policies in the engine, on ranks as threads over Gloo's HashStore with different data per rank:
// identical decisions and collectives everywhere (--check-collectives), bitwise-equal final models, the
// staleness cap never exceeded, fixed with K=1 everywhere equal to ddp; and an end-to-end `dreamddp launch` run.
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <unistd.h>

#include "backends/gloo/gloo_backend.h"
#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/policy/registry.h"
#include "core/tensor/rng.h"
#include "tests/sync/ranks_harness.h"

using namespace dd;
using namespace dd::testing_harness;

namespace {

// Wraps the policy named by the thread's `inner_spec` and records every decision (layer-major per step).
thread_local std::string inner_spec;
thread_local std::vector<int> decision_log;

class Logged : public sync::Policy {
 public:
  // The wrapped policy's profile and votes are the wrapper's (its capabilities, handed on as they are).
  explicit Logged(const sync::PolicySpec&) : p_(sync::make_policy(sync::PolicySpec::parse(inner_spec))) {
    caps_.profiled = p_->caps().profiled;
    caps_.voting = p_->caps().voting;
  }
  std::string describe() const override { return "logged(" + p_->describe() + ")"; }
  void setup(const std::vector<sync::LayerMeta>& l, int w) override { p_->setup(l, w); }
  sync::Action decide(int l, int64_t s) const override {
    auto a = p_->decide(l, s);
    decision_log.push_back(int(a));
    return a;
  }
  void on_actions(int64_t s, const std::vector<sync::Action>& a) override { p_->on_actions(s, a); }
  bool full_average_after(int64_t s) const override { return p_->full_average_after(s); }

 private:
  std::unique_ptr<sync::Policy> p_;
};

const bool registered = sync::register_policy(
    "test-logged", [](const sync::PolicySpec& s) -> std::unique_ptr<sync::Policy> { return std::make_unique<Logged>(s); });

struct RunResult {
  std::vector<std::vector<int>> logs;
  std::vector<std::vector<float>> models;
};

// `steps` steps of `spec` on `world` ranks, each rank on its own data, collectives fingerprinted; finalize().
RunResult run_policy(const std::string& spec, const std::string& model, int world, int steps, double lr = 0.05) {
  EXPECT_TRUE(registered);
  RunResult res;
  res.logs.resize(world);
  res.models.resize(world);
  run_ranks(world, [&](int r, Backend& be) {
    auto m = models::make_model(model, 7);
    RankData data(*m, 4 * steps, 100 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options("test-logged");
    o.check_collectives = true;
    inner_spec = spec;
    decision_log.clear();
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, float(lr));
    e->control.finalize();
    res.logs[r] = decision_log;
    res.models[r] = snapshot(*m);
  });
  return res;
}

}  // namespace

class AdaptiveOnRanks : public ::testing::TestWithParam<std::string> {};

// Decisions from local statistics are agreed through the control all-reduce: with different data per rank every
// rank decides the same, launches the same collectives (check_collectives would throw), ends bitwise equal; and
// the policy really mixes local steps with syncs.
TEST_P(AdaptiveOnRanks, IdenticalDecisionsAndFinalModelWithDifferentDataPerRank) {
  ops::set_threads(1);
  const int world = 3, steps = 16;
  auto res = run_policy(GetParam(), "cnn", world, steps);
  auto proto = models::make_model("cnn", 7);
  const int64_t profiling = sync::make_policy(sync::PolicySpec::parse(GetParam()))->profile_window();  // lock-step
  ASSERT_EQ(res.logs[0].size(), size_t((steps - profiling) * proto->num_layers()));
  int syncs = 0;
  for (int a : res.logs[0]) syncs += a != int(sync::Action::None);
  EXPECT_GT(syncs, 0);
  EXPECT_LT(syncs, int(res.logs[0].size()));
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(res.logs[r], res.logs[0]) << "rank " << r << " decided differently";
    EXPECT_EQ(0, std::memcmp(res.models[r].data(), res.models[0].data(), 4 * res.models[0].size())) << r;
  }
}

// thr=0.15 sits inside the range of these layers' cosines, so both the trigger and the local steps happen.
INSTANTIATE_TEST_SUITE_P(Policies, AdaptiveOnRanks,
                         ::testing::Values("threshold:thr=0.15,max=6", "hybrid:t=4,thr=0.15", "autothreshold:max=8",
                                           "hybrid:t=5,auto=1", "fixed", "dreamddp:h=3,profile_steps=2+staleness:t=2"),
                         [](const auto& i) {
                           std::string s;
                           for (char c : i.param) s += std::isalnum(uint8_t(c)) ? c : '_';
                           return s;
                         });

// The engine's own staleness counter (seen through lr_factor = gamma^stale) never reaches the cap T, and every
// layer is averaged at least once in every T consecutive steps, though the inner policy would wait 100.
TEST(AdaptiveOnRanks, StalenessCapIsNeverExceeded) {
  ops::set_threads(1);
  const int world = 2, steps = 20, T = 3;
  std::vector<int> max_stale(world, 0);
  std::vector<std::vector<int>> logs(world);
  run_ranks(world, [&](int r, Backend& be) {
    auto m = models::make_model("mlp", 3);
    RankData data(*m, 4 * steps, 10 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options("test-logged");
    o.staleness_gamma = 0.5;
    inner_spec = "localsgd:k=100+staleness:t=" + std::to_string(T);
    decision_log.clear();
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) {
      engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, 0.05f);
      for (int l = 0; l < m->num_layers(); ++l)
        max_stale[r] = std::max(max_stale[r], int(std::lround(std::log2(1.0 / e->probe.lr_factor(l)))));
    }
    logs[r] = decision_log;
  });
  EXPECT_EQ(max_stale[0], T - 1);
  EXPECT_EQ(max_stale[1], T - 1);
  const int L = int(logs[0].size()) / steps;
  for (int l = 0; l < L; ++l) {
    int last = -1;
    for (int s = 0; s < steps; ++s)
      if (logs[0][s * L + l] != int(sync::Action::None)) {
        EXPECT_LE(s - last, T) << "layer " << l;
        last = s;
      }
    EXPECT_GE(last, steps - T);
  }
}

// fixed with K_l = 1 for every layer is lock-step gradient all-reduce: the same model as ddp, bit for bit.
TEST(AdaptiveOnRanks, FixedWithPeriodOneEverywhereEqualsDdp) {
  ops::set_threads(1);
  auto a = run_policy("ddp", "mlp", 2, 6);
  auto b = run_policy("fixed:in=1,mid=1,out=1", "mlp", 2, 6);
  EXPECT_EQ(a.models[0], b.models[0]);
  EXPECT_EQ(b.models[0], b.models[1]);
  for (int x : b.logs[0]) EXPECT_EQ(x, int(sync::Action::AllreduceGrads));
}

// End to end through the CLI: two processes with hybrid end with byte-identical parameters.
TEST(AdaptiveEndToEnd, HybridLaunchGivesByteIdenticalParams) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("adaptive_e2e_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmd = std::string(DREAMDDP_BIN) + " launch -n 2 -- train --model mlp --steps 30 --threads 1 " +
                          "--policy hybrid --save-params " + (dir / "p%r.bin").string() + " --out " +
                          (dir / "run").string() + " > " + (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  ASSERT_EQ(rc, 0) << cmd << "\n" << slurp(dir / "log.txt");
  const std::string p0 = slurp(dir / "p0.bin"), p1 = slurp(dir / "p1.bin");
  EXPECT_EQ(p0.size(), 4u * 2913290u);  // every mlp parameter, float32
  EXPECT_TRUE(p0 == p1) << "ranks ended with different parameters";
  EXPECT_NE(slurp(dir / "log.txt").find("hybrid:t=8"), std::string::npos);  // the plan names the policy
  fs::remove_all(dir);
}
