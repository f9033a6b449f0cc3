// RunRecorder: rank 0 writes metrics.h5 (root attributes, /layers, /steps, /eval) and summary.json.
#include <unistd.h>

#include <cmath>
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
  w.set_attributes({{"model", cfg.model}, {"policy", cfg.policy}, {"data", cfg.data}, {"device", cfg.device},
                    {"backend", b ? b->name() : std::string("none")}, {"optimizer", cfg.optimizer},
                    {"lr_schedule", cfg.lr_schedule}, {"start_time", when}, {"host", host_name()},
#ifdef DREAMDDP_GIT_COMMIT
                    {"git_commit", DREAMDDP_GIT_COMMIT},
#endif
                    {"config_file", cfg.config_file}});
  w.set_attribute("world", int64_t(cfg.world));
  w.set_attribute("batch", int64_t(cfg.batch));
  w.set_attribute("steps", int64_t(cfg.steps));
  w.set_attribute("seed", int64_t(cfg.seed));
  w.set_attribute("threads", int64_t(cfg.threads));
  w.set_attribute("lr", double(cfg.lr));
  w.set_attribute("momentum", double(cfg.momentum));
  w.set_attribute("weight_decay", double(cfg.weight_decay));
  w.set_attribute("params", int64_t(m.num_params()));
  if (!cfg.switches.empty()) w.set_attribute("switches", cfg.switches);
  std::vector<telemetry::LayerInfo> layers;
  for (auto* l : m.layers())
    layers.push_back({int32_t(l->index()), l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
  w.write_layers(layers);
}

RunRecorder::~RunRecorder() = default;

telemetry::MetricsWriter* RunRecorder::metrics() { return impl_->w.get(); }

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
