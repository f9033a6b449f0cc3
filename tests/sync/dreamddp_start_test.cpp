// dreamddp's default start: it trains from its first step on plsgd's contiguous groups while the engine records
// ready times and all-reduces, then every rank switches to the one plan solved from the agreed records at the same
// period boundary; no lock-step window sends the whole model meanwhile. A run from profile=DIR is a function of its
// inputs: rerun, it ends bitwise the same.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/ops/ops.h"
#include "core/sync/policy/registry.h"
#include "core/sync/profile/profile_io.h"
#include "core/telemetry/metrics_import.h"
#include "core/telemetry/metrics_writer.h"
#include "tests/sync/ranks_harness.h"

using namespace dd;
using namespace dd::testing_harness;
namespace fs = std::filesystem;

namespace {

struct RankRun {
  std::vector<float> model;         // after finalize()
  std::vector<int64_t> step_bytes;  // payload bytes of each step
};

// Trains `spec` on 2 ranks of mlp:width=64 for `steps`; each rank records its own metrics.h5 under `out`/rank<r>
// when `out` is given.
std::vector<RankRun> train_ranks(const std::string& spec, int steps, const std::string& out = "") {
  ops::set_threads(1);
  std::vector<RankRun> runs(2);
  std::vector<std::unique_ptr<telemetry::MetricsWriter>> w(2);
  for (int r = 0; r < 2 && !out.empty(); ++r) {
    fs::create_directories(out + "/rank" + std::to_string(r));
    telemetry::MetricsWriterOptions wo;
    wo.background = false;
    w[size_t(r)] = std::make_unique<telemetry::MetricsWriter>(out + "/rank" + std::to_string(r) + "/metrics.h5", wo);
  }
  run_ranks(2, [&](int r, Backend& be) {
    auto m = models::make_model("mlp:width=64", 7);
    RankData data(*m, 4 * steps, 100 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options(spec);
    o.check_collectives = true;  // ranks that launch different collectives fail loudly
    o.metrics = w[size_t(r)].get();
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) {
      engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, 0.05f);
      runs[size_t(r)].step_bytes.push_back(e->probe.step_stats().bytes);
    }
    e->control.finalize();
    runs[size_t(r)].model = snapshot(*m);
  });
  for (auto& x : w)
    if (x) x->close();
  EXPECT_EQ(0, std::memcmp(runs[1].model.data(), runs[0].model.data(), 4 * runs[0].model.size())) << spec;
  return runs;
}

nlohmann::json decision(const std::string& dir) {
  auto d = telemetry::read_decisions(dir + "/metrics.h5");
  EXPECT_TRUE(d.count("policy@0")) << "no dreamddp decision in " << dir;
  return d.count("policy@0") ? nlohmann::json::parse(d["policy@0"]) : nlohmann::json();
}

fs::path temp_dir(const std::string& tag) {
  const auto d = fs::temp_directory_path() / ("dd_start_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST(DreamddpStart, RanksAgreeOnThePlanAndSwitchAtTheSameStep) {
  const auto base = temp_dir("agree");
  // h=4: 8 recorded steps (two periods), the plan solved after step 7, in force from the boundary at step 8.
  train_ranks("dreamddp:h=4", 24, base.string());
  const auto a = decision((base / "rank0").string()), b = decision((base / "rank1").string());
  ASSERT_TRUE(a.contains("schedule") && a["schedule"].is_object()) << a.dump();
  EXPECT_EQ(a["profile"]["observed"], true);
  EXPECT_EQ(a["switch_at"], 8);
  EXPECT_EQ(a["decided_at"], 8);
  // A trial comes only where the model puts the two schedules within a tenth of each other; either way every
  // rank records the same.
  for (const char* k : {"switch_at", "decided_at", "schedule", "profile", "trial"}) EXPECT_EQ(a[k], b[k]) << k;
  // The comm model was fitted from the recorded all-reduces: every layer has a positive time.
  for (auto& c : a["profile"]["comm_s"]) EXPECT_GT(c.get<double>(), 0.0) << a.dump();
  fs::remove_all(base);
}

TEST(DreamddpStart, NoWholeModelLockStepAtTheStart) {
  const int steps = 8;  // the recorded window of h=4
  const auto dream = train_ranks("dreamddp:h=4", steps), plsgd = train_ranks("plsgd:h=4", steps),
             lockstep = train_ranks("dreamddp:h=4,lockstep=1", steps);
  int64_t d = 0, p = 0, l = 0;
  for (int s = 0; s < steps; ++s) {
    EXPECT_LE(dream[0].step_bytes[size_t(s)], plsgd[0].step_bytes[size_t(s)]) << "step " << s;
    d += dream[0].step_bytes[size_t(s)], p += plsgd[0].step_bytes[size_t(s)], l += lockstep[0].step_bytes[size_t(s)];
  }
  EXPECT_LE(d, p);
  EXPECT_GT(l, p) << "the lock-step start sends the whole model every step: the comparison can fail";
}

TEST(DreamddpStart, ProfileRerunIsBitwiseTheSame) {
  const auto dir = temp_dir("profile");
  sync::LayerProfile p{{"fc1", "fc2", "fc3", "fc4"}, {0.001, 0.003, 0.003, 0.0001}, {0.004, 0.005, 0.005, 0.001}};
  sync::write_profile(dir.string(), p);
  const auto a = train_ranks("dreamddp:h=4,profile=" + dir.string(), 24), b = train_ranks("dreamddp:h=4,profile=" + dir.string(), 24);
  EXPECT_EQ(0, std::memcmp(a[0].model.data(), b[0].model.data(), 4 * a[0].model.size()));
  fs::remove_all(dir);
}

// With merge keys (a delay, an outer optimizer, compression) the start is the same: no lock-step steps, the profile
// recorded from the averages on copies as they run, every rank's plan and switch the same.
TEST(DreamddpStart, MergeKeysStartFromOrdinarySteps) {
  for (const std::string keys : {",delay=1", ",outer=nesterov", ",compress=int8", ",delay=1,outer=nesterov"}) {
    SCOPED_TRACE(keys);
    const auto base = temp_dir("keys");
    const auto dream = train_ranks("dreamddp:h=4" + keys, 24, base.string());
    const auto a = decision((base / "rank0").string()), b = decision((base / "rank1").string());
    ASSERT_TRUE(a.contains("schedule") && a["schedule"].is_object()) << a.dump();
    EXPECT_EQ(a["profile"]["observed"], true);
    EXPECT_EQ(a["switch_at"], 8);
    for (const char* k : {"switch_at", "decided_at", "schedule", "profile", "trial"}) EXPECT_EQ(a[k], b[k]) << k;
    for (auto& c : a["profile"]["comm_s"]) EXPECT_GT(c.get<double>(), 0.0) << a.dump();
    // The recorded window sends no more than plsgd with the same keys, step by step.
    const auto plsgd = train_ranks("plsgd:h=4" + keys, 8);
    for (int s = 0; s < 8; ++s)
      EXPECT_LE(dream[0].step_bytes[size_t(s)], plsgd[0].step_bytes[size_t(s)]) << "step " << s;
    fs::remove_all(base);
  }
}
