// RunRecorder: rank 0 writes metrics.h5 (root attributes, /layers, /steps, /eval) and summary.json.
#include <unistd.h>

#include <cmath>
#include <climits>
#include <ctime>

#include "backends/backend.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/run_dir.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

struct RunRecorder::Impl {
  std::string out;
  std::unique_ptr<telemetry::MetricsWriter> w;
};

static std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// The full, resolved configuration (docs/design.md "HDF5 schema": `/` attributes hold the full config), one attribute
// per option under its CLI name with '-' as '_', so a metrics.h5 alone says how to rerun it.
static void write_config_attributes(telemetry::MetricsWriter& w, const TrainConfig& c) {
  auto str = [&](const char* k, const std::string& v) { w.set_attribute(k, v); };
  auto i64 = [&](const char* k, int64_t v) { w.set_attribute(k, v); };
  auto f64 = [&](const char* k, double v) { w.set_attribute(k, v); };
  str("model", c.model);
  str("data", c.data);
  str("data_dir", c.data_dir);
  str("policy", c.policy);
  if (!c.switches.empty()) w.set_attribute("switches", c.switches);
  str("backend", name(c.backend));
  str("device", name(c.device));
  i64("batch", c.batch);
  i64("steps", c.steps);
  f64("lr", c.lr);
  f64("momentum", c.momentum);
  i64("nesterov", c.nesterov);
  f64("weight_decay", c.weight_decay);
  str("optimizer", name(c.optimizer));
  str("lr_schedule", name(c.lr_schedule));
  i64("warmup", c.warmup);
  // uint64 seeds above 2^63 do not fit an int64 attribute: those are kept exactly as text.
  if (c.seed <= uint64_t(INT64_MAX)) i64("seed", int64_t(c.seed));
  else str("seed", std::to_string(c.seed));
  i64("eval_every", c.eval_every);
  i64("eval_samples", c.eval_samples);
  str("out", c.out);
  i64("checkpoint_every", c.checkpoint_every);
  str("resume", c.resume);
  str("sensitivity", c.sensitivity);
  str("save_params", c.save_params);
  str("rendezvous", c.rendezvous);
  str("iface", c.iface);
  f64("timeout", c.timeout_s);
  i64("threads", c.threads);
  str("subnormals", subnormals_name(c.subnormals));
  str("precision", precision_name(c.precision));
  i64("log_every", c.log_every);
  i64("check_collectives", c.check_collectives);
  f64("staleness_lr", c.staleness_gamma);
  i64("avg_optimizer_state", c.average_optimizer_state);
  str("last_period", c.last_period_local ? "local" : "scheduled");
  i64("immediate_update", c.immediate_update);
  str("anomaly", name(c.anomaly));
  f64("anomaly_spike", c.anomaly_spike);
  i64("anomaly_window", c.anomaly_window);
  i64("inject_nan", c.inject_nan);
  str("control_file", c.control_file);
  str("on_peer_loss", c.shrink_on_peer_loss ? "shrink" : "exit");
  i64("bucket_cap_mb", c.bucket_cap_mb);
  f64("first_bucket_mb", c.first_bucket_mb);
  str("config_file", c.config_file);
  i64("world", c.world);
  i64("local_world", c.local_world);
}

RunRecorder::RunRecorder(const TrainConfig& cfg, models::Model& m, Backend* b, int64_t resume_after)
    : impl_(std::make_unique<Impl>()) {
  impl_->out = cfg.out;
  if (cfg.out.empty() || cfg.rank != 0) return;
  telemetry::MetricsWriterOptions o;
  o.overwrite = cfg.overwrite;
  o.resume_after_step = resume_after;
  impl_->w = std::make_unique<telemetry::MetricsWriter>(cfg.out + "/metrics.h5", o);
  auto& w = *impl_->w;
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  write_config_attributes(w, cfg);
  // What ran, over what was asked: a single process has no backend.
  w.set_attributes({{"start_time", when}, {"host", host_name()}, {"backend", b ? b->name() : std::string("none")},
#ifdef DREAMDDP_GIT_COMMIT
                    {"git_commit", DREAMDDP_GIT_COMMIT},
#endif
                   });
  w.set_attribute("params", int64_t(m.num_params()));
  std::vector<telemetry::LayerInfo> layers;
  for (auto* l : m.layers())
    layers.push_back({int32_t(l->index()), l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
  w.write_layers(layers);
}

RunRecorder::~RunRecorder() = default;

telemetry::MetricsWriter* RunRecorder::metrics() { return impl_->w.get(); }

void RunRecorder::set_hosts(const std::vector<std::string>& hosts) {
  if (impl_->w) impl_->w->set_attribute("hosts", hosts.empty() ? std::vector<std::string>{host_name()} : hosts);
}

void RunRecorder::step(const telemetry::StepRow& r) {
  if (impl_->w) impl_->w->append_step(r);
}

void RunRecorder::eval(int64_t step, const nlohmann::json& ev) {
  if (!impl_->w) return;
  telemetry::EvalRow r;
  r.step = step;
  r.test_loss = ev.value("test_loss", NAN);
  r.test_accuracy = ev.value("test_accuracy", NAN);
  r.perplexity = ev.value("perplexity", NAN);
  impl_->w->append_eval(r);
}

void RunRecorder::finish_partial() {
  if (impl_->w) impl_->w->close();
}

void RunRecorder::finish(const nlohmann::json& summary) {
  if (!impl_->w) return;
  impl_->w->close();
  write_file_atomic(impl_->out + "/summary.json", summary.dump(2) + "\n");
}

}  // namespace dd::train
