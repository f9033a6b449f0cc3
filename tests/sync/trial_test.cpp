// Measured trials: the engine times the windows a policy asks for and hands every rank the same seconds
// (Trialled::timed_periods / on_period_times); dreamddp measures its layer-wise schedule against Local SGD's where
// the model calls them close on shared cores, and runs the faster.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "base/error.h"
#include "core/ops/ops.h"
#include "core/sync/policy/registry.h"
#include "core/sync/profile/profile_io.h"
#include "core/telemetry/metrics_import.h"
#include "core/telemetry/metrics_writer.h"
#include <nlohmann/json.hpp>
#include "tests/sync/ranks_harness.h"

using namespace dd;
using namespace dd::testing_harness;
namespace fs = std::filesystem;

namespace {

std::mutex mu;
std::vector<std::vector<std::pair<int64_t, std::vector<double>>>> received;  // per rank
thread_local int my_rank = 0;

// Asks for windows [s, s+2), [s+2, s+5) from the first step >= 3 it sees, once.
class Timed : public sync::Policy, public sync::Trialled {
 public:
  Timed() { caps_.trialled = this; }
  std::string describe() const override { return "test-timed"; }
  sync::Action decide(int, int64_t) const override { return sync::Action::AverageParams; }
  void on_step_begin(int64_t step) override {
    if (start_ < 0 && !done_ && step >= 3) start_ = step;
  }
  std::vector<int64_t> timed_periods() const override {
    if (start_ < 0 || done_) return {};
    return {start_, start_ + 2, start_ + 5};
  }
  void on_period_times(int64_t step, const std::vector<double>& s) override {
    std::lock_guard<std::mutex> g(mu);
    received[size_t(my_rank)].push_back({step, s});
    done_ = true;
  }

 private:
  int64_t start_ = -1;
  bool done_ = false;
};
const bool registered = sync::register_policy(
    "test-timed", [](const sync::PolicySpec&) -> std::unique_ptr<sync::Policy> { return std::make_unique<Timed>(); });

}  // namespace

TEST(Trial, EngineHandsEveryRankTheSameWindowTimes) {
  ASSERT_TRUE(registered);
  ops::set_threads(1);
  const int world = 3, steps = 12;
  received.assign(world, {});
  run_ranks(world, [&](int r, Backend& be) {
    my_rank = r;
    auto m = models::make_model("mlp", 7);
    RankData data(*m, 4 * steps, 100 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options("test-timed");
    o.check_collectives = true;
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, 0.05f);
    e->control.finalize();
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(received[r].size(), 1u) << "rank " << r;
    EXPECT_EQ(received[r][0].first, 8) << "handed over at the start of the last boundary's step";
    ASSERT_EQ(received[r][0].second.size(), 2u);
    EXPECT_GT(received[r][0].second[0], 0.0);
    EXPECT_GT(received[r][0].second[1], 0.0);
    EXPECT_EQ(0, std::memcmp(received[r][0].second.data(), received[0][0].second.data(), 2 * sizeof(double)))
        << "rank " << r << " got other times than rank 0";
  }
}

namespace {

const std::vector<sync::LayerMeta> kMlpLayers{{"fc1", "linear", 1, 4}, {"fc2", "linear", 1, 4},
                                              {"fc3", "linear", 1, 4}, {"fc4", "linear", 1, 4}};

// A profile whose layer-wise schedule is modelled within 10% of Local SGD's under the given contention.
std::string contended_profile(const std::string& tag, double compute, double comm) {
  const auto d = fs::temp_directory_path() / ("dd_trial_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  sync::LayerProfile p{{"fc1", "fc2", "fc3", "fc4"}, {0.001, 0.003, 0.003, 0.0001}, {0.004, 0.005, 0.005, 0.001}};
  p.contention = {compute, comm};
  sync::write_profile(d.string(), p);
  return d.string();
}

}  // namespace

TEST(Trial, DreamDdpMeasuresBothSchedulesAndRunsTheFaster) {
  const auto dir = contended_profile("pick", 0.6, 1.0);
  auto p = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=1,profile=" + dir));
  p->setup(kMlpLayers, 2);
  EXPECT_NE(p->caps().reporting->plan().find("measuring both"), std::string::npos) << p->caps().reporting->plan();
  EXPECT_TRUE(p->caps().trialled->timed_periods().empty());  // anchored at the first step it sees
  p->on_step_begin(5);  // one whole period first, then the first boundary
  ASSERT_EQ(p->caps().trialled->timed_periods(), (std::vector<int64_t>{12, 16, 20, 24, 28}));
  auto syncs = [&](int64_t s) {
    int n = 0;
    for (int l = 0; l < 4; ++l) n += p->decide(l, s) != sync::Action::None;
    return n;
  };
  int layerwise = 0;
  for (int64_t s = 12; s < 16; ++s) {
    layerwise += syncs(s);
    EXPECT_FALSE(p->full_average_after(s));
  }
  EXPECT_EQ(layerwise, 4);  // every layer once in the period
  for (int64_t s = 16; s < 24; ++s) {
    EXPECT_EQ(syncs(s), 0) << s;
    EXPECT_EQ(p->full_average_after(s), s == 19 || s == 23) << s;
  }
  for (int64_t s = 24; s < 28; ++s) layerwise += syncs(s);
  EXPECT_EQ(layerwise, 8);
  // A missed boundary (resumed inside the trial): measured again, one period after the next boundary.
  p->caps().trialled->on_period_times(28, {});
  EXPECT_TRUE(p->caps().trialled->timed_periods().empty());
  p->on_step_begin(30);
  ASSERT_EQ(p->caps().trialled->timed_periods().front(), 36);
  const auto v0 = p->caps().reporting->plan_version();
  p->caps().trialled->on_period_times(48, {1.0, 0.8, 0.9, 1.1});  // Local SGD's windows faster
  EXPECT_TRUE(p->caps().trialled->timed_periods().empty());
  EXPECT_GT(p->caps().reporting->plan_version(), v0);
  EXPECT_NE(p->caps().reporting->plan().find("runs Local SGD's schedule"), std::string::npos) << p->caps().reporting->plan();
  for (int64_t s = 48; s < 64; ++s) {
    EXPECT_EQ(syncs(s), 0);
    EXPECT_EQ(p->full_average_after(s), (s + 1) % 4 == 0);
  }
  // The decision survives a checkpoint.
  auto q = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=1,profile=" + dir));
  q->setup(kMlpLayers, 2);
  q->caps().checkpointed->load_state(p->caps().checkpointed->save_state());
  EXPECT_TRUE(q->caps().trialled->timed_periods().empty());
  for (int64_t s = 48; s < 56; ++s) EXPECT_EQ(q->full_average_after(s), (s + 1) % 4 == 0);
  // The layer-wise windows faster: the layer-wise schedule stays.
  auto k = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=1,profile=" + dir));
  k->setup(kMlpLayers, 2);
  k->on_step_begin(0);
  k->caps().trialled->on_period_times(16, {0.8, 1.0, 1.1, 0.9});
  int n = 0;
  for (int64_t s = 16; s < 20; ++s) {
    for (int l = 0; l < 4; ++l) n += k->decide(l, s) != sync::Action::None;
    EXPECT_FALSE(k->full_average_after(s));
  }
  EXPECT_EQ(n, 4);
  // Throughput is timed from where the schedule is settled, over whole periods (Policy::period, settled_by).
  auto fresh = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=1,profile=" + dir));
  fresh->setup(kMlpLayers, 2);
  EXPECT_EQ(fresh->period(), 4);
  EXPECT_EQ(fresh->settled_by(0), 24) << "one period, the 4 periods of the trial, one period to switch";
  EXPECT_EQ(fresh->settled_by(5), 32);
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,lockstep=1"))->settled_by(0), 32)
      << "self-profile: 6 lock-step steps, a trial may follow";
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,lockstep=1,trial=0"))->settled_by(0), 6);
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4"))->settled_by(0), 32)
      << "the default start: 8 recorded steps, the solved plan from the boundary at 8, a trial may follow";
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=0"))->settled_by(0), 8)
      << "the default start without a trial: settled where the solved plan takes over";
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("localsgd:k=8"))->period(), 8);
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("plsgd:h=3"))->period(), 3);
  EXPECT_EQ(sync::make_policy(sync::PolicySpec::parse("ddp"))->period(), 0);
  // trial=0, a profile without contention, and a profile file without trial=1 (a run from a file is a function of
  // its inputs): no trial.
  for (const std::string spec : {"dreamddp:h=4,trial=0,profile=" + dir, "dreamddp:h=4,profile=" + dir,
                                 "dreamddp:h=4,trial=1,profile=" + contended_profile("free", 0, 0)}) {
    auto x = sync::make_policy(sync::PolicySpec::parse(spec));
    x->setup(kMlpLayers, 2);
    x->on_step_begin(0);
    EXPECT_TRUE(x->caps().trialled->timed_periods().empty()) << spec;
  }
}

// Without contention, where the fused-bucket model chose plsgd's split (a latency that a straight line through
// the profile estimates) and it is modelled within 10% of Local SGD's schedule, both are measured too; with
// times proportional to the sizes (no latency) the model decides alone.
TEST(Trial, FusedBucketChoiceCloseToLocalSgdIsMeasured) {
  const int L = 12;
  std::vector<sync::LayerMeta> layers;
  sync::LayerProfile latency, proportional;
  for (int l = 0; l < L; ++l) {
    const int64_t bytes = 1000 + 100 * l;
    layers.push_back({"l" + std::to_string(l), "linear", bytes / 4, bytes});
    for (auto* p : {&latency, &proportional}) {
      p->names.push_back(layers.back().name);
      p->bp.push_back(0.005);
    }
    latency.comm.push_back(0.05 + 1e-5 * double(bytes));  // modelled 137 ms/iter split, Local SGD's 138.7 (H=3)
    proportional.comm.push_back(5e-5 * double(bytes));
  }
  const auto base = fs::temp_directory_path() / ("dd_trial_fused_" + std::to_string(::getpid()));
  fs::remove_all(base);
  sync::write_profile((base / "latency").string(), latency);
  sync::write_profile((base / "proportional").string(), proportional);
  auto p = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=3,trial=1,profile=" + (base / "latency").string()));
  p->setup(layers, 16);
  const std::string plan = p->caps().reporting->plan();
  EXPECT_NE(plan.find("plsgd's contiguous split"), std::string::npos) << plan;
  EXPECT_NE(plan.find("measuring both"), std::string::npos) << plan;
  EXPECT_NE(plan.find("fused-bucket model"), std::string::npos) << plan;
  p->on_step_begin(0);
  EXPECT_FALSE(p->caps().trialled->timed_periods().empty());
  auto q = sync::make_policy(
      sync::PolicySpec::parse("dreamddp:h=3,trial=1,profile=" + (base / "proportional").string()));
  q->setup(layers, 16);
  q->on_step_begin(0);
  EXPECT_TRUE(q->caps().trialled->timed_periods().empty()) << q->caps().reporting->plan();
  fs::remove_all(base);
}

// On ranks: the trial's windows and its agreement are collectives like any other (check_collectives), and the
// ranks end bitwise equal whichever schedule the measurement picked.
TEST(Trial, DreamDdpTrialOnRanksEndsBitwiseEqual) {
  ops::set_threads(1);
  const auto dir = contended_profile("ranks", 0.6, 1.0);
  const int world = 2, steps = 30;
  std::vector<std::vector<float>> models(world);
  run_ranks(world, [&](int r, Backend& be) {
    auto m = models::make_model("mlp", 7);
    RankData data(*m, 4 * steps, 100 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options("dreamddp:h=4,trial=1,profile=" + dir);
    o.check_collectives = true;
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, 0.05f);
    e->control.finalize();
    models[r] = snapshot(*m);
  });
  EXPECT_EQ(0, std::memcmp(models[1].data(), models[0].data(), 4 * models[0].size()));
}

namespace {

// Trains `spec` on 2 ranks for `steps`; rank 0 records metrics.h5 in `out` (when given). Returns rank 0's model
// after finalize(), and checks the ranks agree.
std::vector<float> train_recorded(const std::string& spec, int steps, const std::string& out) {
  ops::set_threads(1);
  std::vector<std::vector<float>> models(2);
  std::unique_ptr<telemetry::MetricsWriter> w;
  if (!out.empty()) {
    fs::create_directories(out);
    telemetry::MetricsWriterOptions wo;
    wo.background = false;
    w = std::make_unique<telemetry::MetricsWriter>(out + "/metrics.h5", wo);
  }
  run_ranks(2, [&](int r, Backend& be) {
    auto m = models::make_model("mlp", 7);
    RankData data(*m, 4 * steps, 100 + r);
    optim::Optimizer opt({}, *m);
    auto o = engine_options(spec);
    o.check_collectives = true;
    if (r == 0) o.metrics = w.get();
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < steps; ++s) engine_step(*m, opt, e->step, data.batch(4 * s, 4), s, 0.05f);
    e->control.finalize();
    models[size_t(r)] = snapshot(*m);
  });
  if (w) w->close();
  EXPECT_EQ(0, std::memcmp(models[1].data(), models[0].data(), 4 * models[0].size())) << spec;
  return models[0];
}

nlohmann::json recorded(const std::string& dir, const std::string& key) {
  auto d = telemetry::read_decisions(dir + "/metrics.h5");
  EXPECT_TRUE(d.count(key)) << "no /decisions attribute " << key << " in " << dir;
  return d.count(key) ? nlohmann::json::parse(d[key]) : nlohmann::json();
}

}  // namespace

// Every decision taken from a measurement lands in /decisions, and replay=RUN_DIR runs bitwise the same as the
// recorded run: a trial's windows and verdict (measured on a contended profile), and a self-profile's lock-step
// window and schedule.
TEST(Replay, RecordedDecisionsReplayBitwise) {
  const auto base = fs::temp_directory_path() / ("dd_replay_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const auto dir = contended_profile("replay", 0.6, 1.0);
  const int steps = 32;  // the trial: steps 4..20 (one period, then 4), its verdict at 20
  const auto a = train_recorded("dreamddp:h=4,trial=1,profile=" + dir, steps, (base / "trial").string());
  const auto j = recorded((base / "trial").string(), "policy@0");
  ASSERT_TRUE(j.contains("trial") && j["trial"].is_object()) << j.dump();
  EXPECT_EQ(j["trial"]["start"], 4);
  ASSERT_TRUE(j["trial"].contains("verdict")) << j.dump();
  EXPECT_EQ(j["decided_at"], 20);
  EXPECT_EQ(j["profile"]["source"], "file");
  EXPECT_EQ(j["schedule"]["phase"].size(), 4u);
  const auto b = train_recorded("dreamddp:h=4,replay=" + (base / "trial").string(), steps, (base / "trial_replay").string());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size())) << "the replay of a trial differs from its run";
  const auto jr = recorded((base / "trial_replay").string(), "policy@0");
  EXPECT_EQ(jr["trial"]["verdict"], j["trial"]["verdict"]);
  EXPECT_EQ(jr["schedule"]["phase"], j["schedule"]["phase"]);

  for (const std::string start : {"", ",lockstep=1"}) {  // recorded from ordinary steps, and lock-step
    const auto c = train_recorded("dreamddp:h=4,profile_steps=3" + start, 32, (base / "self").string());
    const auto js = recorded((base / "self").string(), "policy@0");
    EXPECT_EQ(js["profile"]["source"], "self-profile");
    EXPECT_EQ(js["profile"]["observed"], start.empty());
    EXPECT_EQ(js["profile"]["backward_s"].size(), 4u);
    const auto d = train_recorded("dreamddp:h=4,replay=" + (base / "self").string(), 32, "");
    EXPECT_EQ(0, std::memcmp(c.data(), d.data(), 4 * c.size())) << "the replay of a self-profiled run differs" << start;
    if (start.empty()) fs::remove_all(base / "self");
  }

  // A replay that cannot be one is refused before any work.
  EXPECT_THROW(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=8,replay=" + (base / "self").string())), UsageError);
  EXPECT_THROW(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,replay=" + base.string())), UsageError);
  EXPECT_THROW(sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,replay=" + (base / "self").string() +
                                                         ",profile=" + dir)), UsageError);
  fs::remove_all(base);
}

// The default start records its profile from ordinary, overlapped steps: the model then prices Local SGD's blocking
// average at the overlapped cost, so where it puts the two schedules within 10% of each other both are measured;
// where the layer-wise plan is modelled far ahead, the model decides alone.
TEST(Trial, SelfProfiledCloseToLocalSgdIsMeasured) {
  auto started = [](const std::vector<double>& comm) {
    auto p = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4"));
    p->setup(kMlpLayers, 2);
    sync::LayerTimes t;
    t.backward_s = {0.002, 0.004, 0.004, 0.0001};
    t.comm_s = comm;
    p->caps().profiled->on_profile(t);
    p->on_step_begin(8);
    return p;
  };
  // Communication far above backward: every schedule waits for it, Local SGD's within a tenth of the layer-wise.
  auto close = started({0.040, 0.048, 0.048, 0.008});
  EXPECT_FALSE(close->caps().trialled->timed_periods().empty()) << close->caps().reporting->plan();
  EXPECT_NE(close->caps().reporting->plan().find("recorded in overlapped steps"), std::string::npos)
      << close->caps().reporting->plan();
  // Communication that hides behind backward: the layer-wise plan is modelled well ahead, no trial.
  auto hidden = started({0.0005, 0.003, 0.003, 0.0005});
  EXPECT_TRUE(hidden->caps().trialled->timed_periods().empty()) << hidden->caps().reporting->plan();
  // trial=0: the model alone decides.
  auto p = sync::make_policy(sync::PolicySpec::parse("dreamddp:h=4,trial=0"));
  p->setup(kMlpLayers, 2);
  sync::LayerTimes t;
  t.backward_s = {0.002, 0.004, 0.004, 0.0001};
  t.comm_s = {0.040, 0.048, 0.048, 0.008};
  p->caps().profiled->on_profile(t);
  p->on_step_begin(8);
  EXPECT_TRUE(p->caps().trialled->timed_periods().empty());
}
