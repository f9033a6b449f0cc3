// The training loop end to end, in process: the sensitivity probe never changes the trajectory, and the
// metrics.h5 of a 2-rank run holds what docs/design.md's schema promises (checked with h5py).
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "backends/gloo/gloo_backend.h"
#include "base/error.h"
#include "core/common/crc.h"
#include "core/models/model.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/policy/closing_period.h"
#include "core/sync/policy/registry.h"
#include "core/sync/types/data_path.h"
#include "core/sync/types/bucket_plan.h"
#include "core/optim/optimizer.h"
#include "core/train/checkpoint.h"
#include "core/train/device_state.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"
#include "core/train/trainer_parts.h"
#include <nlohmann/json.hpp>
#include <cmath>

namespace fs = std::filesystem;
using namespace dd;

namespace {

std::string tmpdir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("dd_train_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

train::TrainConfig base(const std::string& model, int64_t steps) {
  train::TrainConfig c;
  c.model = model;
  c.data = "synthetic";
  c.batch = 16;
  c.steps = steps;
  c.threads = 1;
  c.eval_samples = 64;
  train::resolve_and_validate(c);
  return c;
}

// Runs `world` ranks as threads; each rank's Trainer gets its own backend over one HashStore.
void run_world(int world, const train::TrainConfig& cfg0) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<std::thread> th;
  std::vector<std::exception_ptr> err(world);
  for (int r = 0; r < world; ++r)
    th.emplace_back([&, r] {
      try {
        auto cfg = cfg0;
        cfg.rank = r;
        cfg.world = world;
        cfg.local_world = world;
        BackendOptions o;
        o.rank = r;
        o.world = world;
        o.timeout_s = 30;
        auto b = make_gloo_backend(r, world, store, o);
        train::Trainer(cfg, b.get()).run();
      } catch (...) {
        err[r] = std::current_exception();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
}

int python(const std::string& script) {
  std::string path = fs::temp_directory_path() / ("dd_check_" + std::to_string(::getpid()) + ".py");
  std::ofstream(path) << script;
  return std::system((std::string(PY) + " " + path).c_str());
}

}  // namespace

// Probing computes extra gradients at probe steps; the trained parameters must be bit-identical to a run
// without the probe (cnn: BatchNorm running stats must be restored too).
TEST(Sensitivity, ProbeDoesNotChangeTheTrajectory) {
  for (const char* model : {"mlp", "cnn"}) {
    for (const char* spec : {"delays=1/2,every=5,batch=48", "delays=1/3,probe=minibatch,every=4"}) {
      std::string d = tmpdir("probe");
      auto a = base(model, 14);
      a.save_params = d + "/plain.bin";
      train::Trainer(a, nullptr).run();
      auto b = a;
      b.sensitivity = spec;
      b.save_params = d + "/probed.bin";
      b.out = d + "/run";
      train::prepare_run_dir(b.out, false, true);
      train::Trainer(b, nullptr).run();
      auto p = slurp(a.save_params), q = slurp(b.save_params);
      ASSERT_GT(p.size(), 0u);
      EXPECT_TRUE(p == q) << model << " " << spec << ": the probe changed the trajectory";
      fs::remove_all(d);
    }
  }
}

TEST(Sensitivity, BadSpecsAreUsageErrors) {
  auto c = base("mlp", 20);
  for (const char* bad : {"delays=0", "delays=1/x", "every=0", "probe=weird", "nosuch=1", "delays=30", "delays=4,every=3"}) {
    c.sensitivity = bad;
    EXPECT_ANY_THROW(train::resolve_and_validate(c)) << bad;
  }
}

// --policy and --switch are parsed once, by resolve_and_validate; a config changed afterwards no longer matches
// its parsed specs (the Trainer then parses again).
TEST(Config, ValidationParsesThePolicyAndSwitchesOnce) {
  train::TrainConfig c;
  c.model = "mlp";
  c.data = "synthetic";
  c.steps = 20;
  c.threads = 1;
  c.policy = "plsgd:h=3";
  c.switches = {"12:ddp", "5:localsgd:k=2"};
  EXPECT_FALSE(train::policy_specs_current(c));
  train::resolve_and_validate(c);
  EXPECT_EQ(c.policy_spec.name, "plsgd");
  EXPECT_EQ(c.policy_spec.text, "plsgd:h=3");
  EXPECT_EQ(c.policy_spec.kv.at("h"), "3");
  ASSERT_EQ(c.policy_switches.size(), 2u);
  EXPECT_EQ(c.policy_switches[0].step, 5);
  EXPECT_EQ(c.policy_switches[0].spec.name, "localsgd");
  EXPECT_EQ(c.policy_switches[1].step, 12);
  EXPECT_EQ(c.policy_switches[1].spec.text, "ddp");
  EXPECT_TRUE(train::policy_specs_current(c));
  auto d = c;
  d.policy = "ddp";
  EXPECT_FALSE(train::policy_specs_current(d));
  d = c;
  d.switches[1] = "6:localsgd:k=2";
  EXPECT_FALSE(train::policy_specs_current(d));
}

// The optimizer Auto resolves from the model itself (a language model takes tokens: adamw); the optimizer and the
// schedule reach core/optim as its own kinds.
TEST(Config, AutoOptimizerFollowsTheModel) {
  auto resolved = [](const char* model) {
    train::TrainConfig c;
    c.data = "synthetic";
    c.steps = 10;
    c.threads = 1;
    c.model = model;
    train::resolve_and_validate(c);
    return c;
  };
  train::TrainConfig c = resolved("mlp");
  EXPECT_EQ(c.optimizer, train::OptimizerKind::Sgd);
  EXPECT_EQ(train::optim_config(c).kind, optim::OptimizerKind::Sgd);
  c = resolved("gpt-mini");
  EXPECT_EQ(c.optimizer, train::OptimizerKind::AdamW);
  EXPECT_EQ(train::optim_config(c).kind, optim::OptimizerKind::AdamW);
  EXPECT_STREQ(optim::name(train::optim_config(c).kind), "adamw");
  c.inject_nan = 3;
  try {
    train::resolve_and_validate(c);
    ADD_FAILURE() << "--inject-nan on a language model was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--inject-nan poisons image inputs; gpt-mini takes tokens");
  }
}

// Every train option (resolved, under its CLI name with '-' as '_'), plus what the run was on.
const char* const kConfigKeys =
    "model data data_dir policy backend device batch steps lr momentum nesterov weight_decay optimizer lr_schedule "
    "warmup seed eval_every eval_samples out checkpoint_every resume sensitivity save_params rendezvous iface timeout "
    "threads log_every check_collectives staleness_lr avg_optimizer_state last_period immediate_update anomaly "
    "anomaly_spike anomaly_window inject_nan control_file bucket_cap_mb first_bucket_mb config_file world local_world start_time "
    "host hosts params";

// metrics.h5 of a 2-rank dreamddp run with the probe: /steps has one row per step, /sync_events one row per
// launched bucket, /eval the evaluations, /layers the model's layers, sensitivity [probes, layers, delays] in
// [-1, 1]; h5dump opens it.
TEST(Telemetry, SchemaOfATwoRankRun) {
  std::string d = tmpdir("schema");
  auto c = base("mlp", 24);
  c.policy = "plsgd:h=3";
  c.eval_every = 8;
  c.sensitivity = "delays=1/2/4,every=6,batch=64";
  c.out = d + "/run";
  train::prepare_run_dir(c.out, false, true);
  run_world(2, c);
  // Expected buckets: the engine's own planner over plsgd's actions (launched every step for the group due), none in
  // the last period, whose averages are left to the closing average (closing_period.h).
  auto m = models::make_model("mlp", 0);
  auto policy = sync::make_policy(sync::PolicySpec::parse(c.policy));
  std::vector<sync::LayerMeta> meta;
  std::vector<sync::LayerRange> ranges;
  for (auto* l : m->layers()) {
    meta.push_back({l->name, l->kind(), l->num_params(), 4 * l->num_params()});
    ranges.push_back({l->param_offset(), l->num_params(), 0, 0});
  }
  policy->setup(meta, 2);
  const int64_t closing = sync::closing_period_start(*policy, c.steps - 1);
  ASSERT_GT(closing, 0);
  int64_t buckets = 0;
  for (int64_t s = 0; s < closing; ++s) {
    std::vector<sync::Action> a;
    for (int l = 0; l < m->num_layers(); ++l) a.push_back(policy->decide(l, s));
    buckets += int64_t(sync::plan_buckets(a, ranges, 1 << 20, 25 << 20).size());
  }
  const std::string h5 = c.out + "/metrics.h5";
  std::string script = "import h5py, numpy as np, sys\nf = h5py.File('" + h5 + "', 'r')\n" +
                       "assert f['steps'].shape[0] == " + std::to_string(c.steps) + ", f['steps'].shape\n" +
                       "assert list(f['steps']['step']) == list(range(" + std::to_string(c.steps) + "))\n" +
                       "assert f['sync_events'].shape[0] == " + std::to_string(buckets) + ", f['sync_events'].shape\n" +
                       "assert f['eval'].shape[0] == 3, f['eval'].shape\n" +
                       "assert f['layers'].shape[0] == 4 and f['layers']['name'][0] in (b'fc1', 'fc1')\n" +
                       "c = f['sensitivity/cosine'][:]\n" +
                       "assert c.shape == (len(f['sensitivity/probe_steps']), 4, 3), c.shape\n" +
                       "assert c.shape[0] >= 2 and np.all(np.abs(c) <= 1.0 + 1e-6), c\n" +
                       "assert list(f['sensitivity/delays'][:]) == [1, 2, 4]\n" +
                       "assert f.attrs['policy'] == 'plsgd:h=3' and int(f.attrs['world']) == 2\n" +
                       // docs/design.md: the root attributes hold the full config and every rank's host name.
                       "keys = '" + kConfigKeys + "'.split()\n" +
                       "missing = [k for k in keys if k not in f.attrs]\n" +
                       "assert not missing, missing\n" +
                       "assert f.attrs['sensitivity'] == '" + c.sensitivity + "', f.attrs['sensitivity']\n" +
                       "assert int(f.attrs['warmup']) >= 0 and int(f.attrs['steps']) == " + std::to_string(c.steps) + "\n" +
                       "hosts = list(f.attrs['hosts'])\n" +
                       "assert len(hosts) == 2 and all(isinstance(h, str) and h for h in hosts), hosts\n" +
                       "ev = f['sync_events'][:]\n" +
                       "assert np.all(ev['end_s'] >= ev['launch_s']) and np.all(ev['bytes'] > 0)\n";
  EXPECT_EQ(python(script), 0);
  EXPECT_EQ(std::system(("h5dump -H " + h5 + " > /dev/null").c_str()), 0);
  EXPECT_TRUE(fs::exists(c.out + "/summary.json"));
  fs::remove_all(d);
}

namespace {
// One line per row of TABLE in the metrics file H5, formatted by the Python expression ROW over the row `e`.
std::string table_lines(const std::string& h5, const std::string& table, const std::string& row) {
  std::string out = h5 + "." + table + ".txt";
  std::string cmd = std::string(PY) + " -c \"import h5py; f=h5py.File('" + h5 + "','r'); print('\\n'.join(" + row +
                    " for e in f['" + table + "'][:]))\" > " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return slurp(out);
}

std::string events_of(const std::string& h5) {
  return table_lines(h5, "events", "e['kind'].decode() + ' ' + str(e['step'])");
}

// "step:first-last:action" per /sync_events row, one per line.
std::string sync_events_of(const std::string& h5) {
  return table_lines(h5, "sync_events", "'%d:%d-%d:%d' % (e['step'], e['first_layer'], e['last_layer'], e['action'])");
}
}  // namespace

// An injected NaN (bad data on rank 0) is caught before the update, agreed through the control all-reduce,
// triggers the fallback (average once, then lock-step), and the run goes on to converge with equal ranks. The
// immediate-update path (layers updated as their averages arrive) obeys the same guard.
static void expect_nan_fallback(bool immediate_update) {
  std::string d = tmpdir(immediate_update ? "anomaly_immediate" : "anomaly");
  auto c = base("mlp", 60);
  c.data = "fashion-mnist";
  c.batch = 32;
  c.policy = "plsgd:h=2";
  c.immediate_update = immediate_update;
  c.inject_nan = 20;
  c.anomaly_window = 10;
  c.eval_samples = 500;
  c.out = d + "/run";
  c.save_params = d + "/p%r.bin";
  train::prepare_run_dir(c.out, false, true);
  run_world(2, c);
  EXPECT_EQ(slurp(d + "/p0.bin"), slurp(d + "/p1.bin"));
  auto ev = events_of(c.out + "/metrics.h5");
  EXPECT_NE(ev.find("anomaly-local 20"), std::string::npos) << ev;
  EXPECT_NE(ev.find("anomaly 20"), std::string::npos) << ev;  // the agreed anomaly names the step it was seen at
  // plsgd casts no votes of its own: the anomaly flag alone is applied two steps late (no per-step rendezvous).
  EXPECT_NE(ev.find("fallback 22"), std::string::npos) << ev;
  std::ifstream sj(c.out + "/summary.json");
  auto s = nlohmann::json::parse(sj);
  EXPECT_TRUE(std::isfinite(s["final_loss"].get<double>())) << "a non-finite gradient reached the parameters";
  EXPECT_GT(s["test_accuracy"].get<double>(), 0.5);  // chance is 0.1: it still learns
  fs::remove_all(d);
}

TEST(Anomaly, InjectedNanTriggersFallbackAndTheRunConverges) { expect_nan_fallback(false); }
TEST(Anomaly, ImmediateUpdateObeysTheGuard) { expect_nan_fallback(true); }

// What an anomaly run leaves: every /events row ("kind step detail" per line) and rank 0's final parameters.
struct AnomalyRun {
  std::string events;
  std::string params;
};

// Two cnn ranks with bad data on rank 0 at step 10. In the cnn the NaN reaches every layer's gradient (through
// BatchNorm's batch statistics), so which layer a report names depends on the order the layers are checked in.
static AnomalyRun cnn_nan_run(bool immediate_update) {
  std::string d = tmpdir(immediate_update ? "anomaly_cnn_immediate" : "anomaly_cnn");
  auto c = base("cnn", 30);
  c.data = "fashion-mnist";
  c.policy = "plsgd:h=2";
  c.immediate_update = immediate_update;
  c.inject_nan = 10;
  c.anomaly_window = 5;
  c.out = d + "/run";
  c.save_params = d + "/p%r.bin";
  train::prepare_run_dir(c.out, false, true);
  run_world(2, c);
  AnomalyRun run{table_lines(c.out + "/metrics.h5", "events",
                             "e['kind'].decode() + ' ' + str(e['step']) + ' ' + e['detail'].decode()"),
                 slurp(d + "/p0.bin")};
  fs::remove_all(d);
  return run;
}

// One guard for both update paths: the same layers skipped (the same final model, bit for bit) and the same
// anomaly reports, word for word: the layer named is the lowest-index non-finite one, whatever order the
// immediate path updates the layers in.
TEST(Anomaly, ImmediateAndDeferredUpdateReportAndSkipAlike) {
  const AnomalyRun deferred = cnn_nan_run(false), immediate = cnn_nan_run(true);
  EXPECT_NE(deferred.events.find("anomaly-local 10 non-finite gradient in conv1\n"), std::string::npos)
      << deferred.events;
  EXPECT_NE(deferred.events.find("fallback 12 "), std::string::npos) << deferred.events;
  EXPECT_EQ(immediate.events, deferred.events);
  EXPECT_EQ(immediate.params, deferred.params);
}

// anomaly=stop writes a checkpoint and stops with AnomalyStop (exit 4 in the CLI).
TEST(Anomaly, StopWritesACheckpoint) {
  std::string d = tmpdir("anomaly_stop");
  auto c = base("mlp", 30);
  c.inject_nan = 5;
  c.anomaly = dd::train::AnomalyMode::Stop;
  c.out = d + "/run";
  train::prepare_run_dir(c.out, false, true);
  EXPECT_THROW(train::Trainer(c, nullptr).run(), AnomalyStop);
  EXPECT_TRUE(fs::exists(c.out + "/checkpoint.rank0.bin"));
  EXPECT_NE(events_of(c.out + "/metrics.h5").find("anomaly 5"), std::string::npos);
  fs::remove_all(d);
}

// A policy spec written to the control file is picked up by rank 0, agreed, and switched to on every rank at
// the same step (the final models stay bitwise equal).
TEST(HotSwitch, ControlFileSwitchesEveryRankAtTheSameStep) {
  std::string d = tmpdir("control");
  std::ofstream(d + "/control") << "localsgd:k=3\n";
  auto c = base("mlp", 25);
  c.policy = "ddp";
  c.control_file = d + "/control";
  c.out = d + "/run";
  c.save_params = d + "/p%r.bin";
  train::prepare_run_dir(c.out, false, true);
  run_world(2, c);
  EXPECT_EQ(slurp(d + "/p0.bin"), slurp(d + "/p1.bin"));
  EXPECT_NE(events_of(c.out + "/metrics.h5").find("switch 1"), std::string::npos);
  fs::remove_all(d);
}

// Bad checkpoints are clear usage errors and nothing is loaded: truncated, corrupt, another model, another
// configuration, missing.
TEST(Checkpoint, BadCheckpointsAreUsageErrors) {
  std::string d = tmpdir("ckpt");
  auto c = base("mlp", 6);
  c.checkpoint_every = 3;
  c.out = d + "/run";
  train::prepare_run_dir(c.out, false, true);
  train::Trainer(c, nullptr).run();
  const std::string good = c.out + "/checkpoint.rank0.bin", bytes = slurp(good);
  ASSERT_GT(bytes.size(), 1000u);
  auto resume_with = [&](const std::string& content, const std::string& model, uint64_t seed) {
    std::string rd = d + "/r" + std::to_string(std::rand());
    fs::create_directories(rd);
    if (!content.empty()) std::ofstream(rd + "/checkpoint.rank0.bin", std::ios::binary) << content;
    auto r = base(model, 10);
    r.seed = seed;
    r.resume = rd;
    try {
      train::Trainer(r, nullptr).run();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(resume_with(bytes.substr(0, bytes.size() / 2), "mlp", 0).find("truncated or corrupt"), std::string::npos);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x5a;
  EXPECT_NE(resume_with(flipped, "mlp", 0).find("corrupt"), std::string::npos);
  EXPECT_NE(resume_with("not a checkpoint at all", "mlp", 0).find("not a dreamddp checkpoint"), std::string::npos);
  EXPECT_NE(resume_with(bytes, "cnn", 0).find("model"), std::string::npos);
  EXPECT_NE(resume_with(bytes, "mlp", 7).find("seed"), std::string::npos);
  EXPECT_NE(resume_with("", "mlp", 0).find("cannot read checkpoint"), std::string::npos);
  EXPECT_EQ(resume_with(bytes, "mlp", 0), "no error");
  fs::remove_all(d);
}

// --switch STEP:SPEC is applied at STEP on every rank (events at that step; models stay bitwise equal).
TEST(HotSwitch, SwitchAtStepAppliesThereOnEveryRank) {
  std::string d = tmpdir("switch");
  auto c = base("cnn", 16);
  c.policy = "localsgd:k=4";
  c.switches = {"7:plsgd:h=2", "12:ddp"};
  c.out = d + "/run";
  c.save_params = d + "/p%r.bin";
  train::prepare_run_dir(c.out, false, true);
  run_world(3, c);
  EXPECT_EQ(slurp(d + "/p0.bin"), slurp(d + "/p1.bin"));
  EXPECT_EQ(slurp(d + "/p0.bin"), slurp(d + "/p2.bin"));
  auto ev = events_of(c.out + "/metrics.h5");
  EXPECT_NE(ev.find("switch 7"), std::string::npos) << ev;
  EXPECT_NE(ev.find("switch 12"), std::string::npos) << ev;
  // Blocking averages are collectives too: Local SGD's after steps 3 (k=4), the switch's at 7 (every layer is
  // local under localsgd), and plsgd's local layers averaged when ddp takes over at 12 each get rows.
  const std::string se = "\n" + sync_events_of(c.out + "/metrics.h5");
  for (int step : {3, 7, 12}) EXPECT_NE(se.find("\n" + std::to_string(step) + ":"), std::string::npos) << step << "\n" << se;
  EXPECT_EQ(se.find("\n0:"), std::string::npos) << se;  // steps 0..2 of localsgd send nothing
  fs::remove_all(d);
}

// The engine's start: ranks built from the same seed already hold the same state, which the hashes show, so
// nothing is broadcast; ranks built from different seeds (one bit apart, or a whole model apart) are told apart, and
// the engine's broadcast then leaves every rank with rank 0's parameters, bitwise.
namespace {
struct CountingPath : sync::HostDataPath {
  int* broadcasts;
  explicit CountingPath(int* n) : broadcasts(n) {}
  WorkPtr broadcast(Backend& g, float* p, size_t n, int root) override {
    ++*broadcasts;
    return HostDataPath::broadcast(g, p, n, root);
  }
};
// A path whose crc is DataPath's default (through host snapshots, as for device arenas), noting each snapshot's size.
struct SnapshotPath : sync::HostDataPath {
  std::vector<size_t> saves;
  void save(const float* p, size_t n, std::vector<float>& host) override {
    saves.push_back(n);
    HostDataPath::save(p, n, host);
  }
  uint32_t crc(const float* p, size_t n, uint32_t c) override { return DataPath::crc(p, n, c); }
};
}  // namespace

// The default crc reads an arena in snapshots of at most 4 MiB and hashes them as the whole range would hash.
TEST(SameStart, DefaultCrcReadsInBoundedPiecesAndHashesTheWhole) {
  const size_t n = (size_t(5) << 19) + 3;  // two and a half pieces
  std::vector<float> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = float(i % 977) * 0.37f - 11.0f;
  SnapshotPath dp;
  EXPECT_EQ(dp.crc(a.data(), n, 7u), crc32_of(a.data(), 4 * n, 7u));
  ASSERT_EQ(dp.saves.size(), 3u);
  for (size_t k : dp.saves) EXPECT_LE(k, size_t(1) << 20);
  EXPECT_EQ(dp.saves[0] + dp.saves[1] + dp.saves[2], n);
  dp.saves.clear();
  EXPECT_EQ(dp.crc(a.data(), 0, 7u), 7u) << "an empty range continues the given crc";
  EXPECT_TRUE(dp.saves.empty());
}

TEST(SameStart, HashesTellEqualStatesAndTheEngineEvensOthers) {
  for (const int differ : {0, 1, 2}) {
    SCOPED_TRACE("differ " + std::to_string(differ));
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    std::vector<std::vector<float>> after(2);
    std::vector<int> broadcasts(2, 0);
    std::vector<std::thread> th;
    std::vector<std::exception_ptr> err(2);
    for (int r = 0; r < 2; ++r)
      th.emplace_back([&, r] {
        try {
          BackendOptions o;
          o.rank = r;
          o.world = 2;
          o.timeout_s = 30;
          o.prefix = "same" + std::to_string(differ);
          auto b = make_gloo_backend(r, 2, store, o);
          auto m = models::make_model("mlp", differ == 2 ? 5 + r : 5);
          if (differ == 1 && r == 1) {  // one bit of the last parameter
            uint32_t bits;
            std::memcpy(&bits, &m->params()[m->params().size() - 1], 4);
            bits ^= 1u;
            std::memcpy(&m->params()[m->params().size() - 1], &bits, 4);
          }
          optim::Optimizer opt({}, *m);
          sync::EngineOptions eo;
          eo.policy = sync::PolicySpec::parse("ddp");
          eo.verbose = false;
          auto e = sync::make_layer_sync(eo, sync::layer_table(*m), sync::arenas_of(*m, opt),
                                         std::make_unique<CountingPath>(&broadcasts[r]), *b);
          after[r].assign(m->params().data(), m->params().data() + m->params().size());
        } catch (...) {
          err[r] = std::current_exception();
        }
      });
    for (auto& t : th) t.join();
    for (auto& e : err)
      if (e) std::rethrow_exception(e);
    EXPECT_EQ(broadcasts[0] > 0, differ != 0) << "a broadcast when, and only when, the hashes differ";
    EXPECT_EQ(broadcasts[1], broadcasts[0]);
    ASSERT_EQ(after[0].size(), after[1].size());
    EXPECT_EQ(std::memcmp(after[0].data(), after[1].data(), after[0].size() * 4), 0);
    auto seed5 = models::make_model("mlp", 5);
    EXPECT_EQ(std::memcmp(after[0].data(), seed5->params().data(), after[0].size() * 4), 0) << "rank 0's own start";
  }
}

// Ranks killed between their checkpoint writes hold different newest steps: resume agrees on the newest step
// every rank has (each keeps the previous generation) and still ends bitwise equal to an uninterrupted run.
TEST(Checkpoint, RanksResumeFromTheNewestCommonStep) {
  std::string d = tmpdir("ckpt_common");
  auto ref = base("mlp", 12);
  ref.policy = "plsgd:h=3";
  ref.lr_schedule = train::LrSchedule::Const;  // the shorter interrupted run must see the same learning rates
  ref.warmup = 0;
  ref.save_params = d + "/ref%r.bin";
  run_world(2, ref);
  auto c = ref;
  c.steps = 9;
  c.checkpoint_every = 3;  // checkpoints after steps 2, 5, 8
  c.save_params.clear();
  c.out = d + "/run";
  train::prepare_run_dir(c.out, false, true);
  run_world(2, c);
  // Rank 1 "died" before writing step 8: it has only step 5 (as its newest file).
  fs::rename(train::previous_checkpoint_path(c.out, 1), train::checkpoint_path(c.out, 1));
  auto r = ref;
  r.resume = c.out;
  r.out = c.out;
  r.save_params = d + "/res%r.bin";
  run_world(2, r);
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(slurp(d + "/ref" + std::to_string(k) + ".bin"), slurp(d + "/res" + std::to_string(k) + ".bin")) << k;
  fs::remove_all(d);
}

// The ranks of one run start together: another rank's write probe (check_output_dir) in the directory that one
// rank has just made is not an earlier run, while any other entry is.
TEST(RunDir, AnotherRanksWriteProbeIsNotAnEarlierRun) {
  const auto d = std::filesystem::temp_directory_path() / ("dd_run_dir_probe_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d / ".dd-write-probe.12345");
  EXPECT_NO_THROW(dd::train::prepare_run_dir(d.string(), false, true));
  std::ofstream(d / "metrics.h5") << "x";
  EXPECT_THROW(dd::train::prepare_run_dir(d.string(), false, true), dd::UsageError);
  std::filesystem::remove_all(d);
}
