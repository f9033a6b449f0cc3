// Trainer: one rank's training loop. Single process when there is no backend; with a backend the sync engine
// hooks into backward and the update (core/sync).
#include "core/train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

#include "backends/backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/sharder.h"
#include "core/models/model.h"
#include "core/models/model_spec.h"
#include "core/ops/ops.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/sync/control/control_file.h"
#include "core/sync/engine/sync_engine.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/policy/registry.h"
#include "core/sync/policy/timed_window.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/anomaly.h"
#include "core/train/checkpoint.h"
#include "core/train/device_state.h"
#include "core/train/elastic.h"
#include "core/train/pause_points.h"
#include "core/train/progress.h"
#include "core/train/run_dir.h"
#include "core/train/sensitivity.h"
#include "core/train/step.h"
#include "core/train/trainer_impl.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

// --device cuda: a visible device and a setup the GPU path supports, refused up front with one line each.
static void validate_cuda(const TrainConfig& c) {
  check_cuda_usable();  // every model has a GPU path (one source per model, core/models)
  if (!c.sensitivity.empty())
    throw UsageError("--sensitivity: the probe runs on the CPU model; it is not available with --device cuda");
  // Policies that read each layer's local gradient on the host every step (threshold, hybrid, hier's adaptive
  // part) would copy the whole gradient to the host per step: refused rather than silently slow.
  std::vector<std::string> specs{c.policy};
  for (auto& sw : sync::parse_switches(c.switches)) specs.push_back(sw.spec);
  for (auto& spec : specs) sync::check_policy_fits_device(*sync::make_policy(sync::PolicySpec::parse(spec)), spec, true);
}

// Why --on-peer-loss shrink refuses policy `spec` ("" when it does not).
static std::string shrink_refusal(const std::string& spec) {
  const std::string why = unmappable_policy_state(spec);
  return why.empty() ? why : "--on-peer-loss shrink: " + why + ", so its state does not carry to a smaller world";
}

// Refuses --on-peer-loss shrink where it cannot work, with one line (dd::UsageError): the mpi and nccl backends
// (no fault tolerance here: a lost peer ends the job with exit 3), --device cuda (an unfinished collective is undone
// in host memory only), --sensitivity (its open probe is per rank) and policies whose state does not carry to a smaller world
// (the rule of --resume on another world size), also as a --switch.
static void check_shrink_fits(const TrainConfig& c) {
  const std::string head = "--on-peer-loss shrink: ";
  if (c.backend == BackendKind::Mpi)
    throw UsageError(head + "the mpi backend has no fault tolerance here: a lost peer ends the job with exit 3 "
                     "(use --backend gloo, or --on-peer-loss exit)");
  if (c.backend == BackendKind::Nccl)
    throw UsageError(head + "the nccl backend cannot be rebuilt after a lost peer here; use --backend gloo");
  if (c.device == Device::Cuda)
    throw UsageError(head + "not with --device cuda (what a lost peer leaves unfinished is undone in host memory only)");
  if (!c.sensitivity.empty()) throw UsageError(head + "not with --sensitivity (its open probe is per rank)");
  std::vector<std::string> specs{c.policy};
  for (auto& sw : sync::parse_switches(c.switches)) specs.push_back(sw.spec);
  for (auto& spec : specs)
    if (const std::string why = shrink_refusal(spec); !why.empty()) throw UsageError(why);
}

std::string control_spec_refusal(const TrainConfig& c, const std::vector<nn::Layer*>& layers, const std::string& spec) {
  try {
    const auto p = sync::make_policy(sync::PolicySpec::parse(spec));
    if (c.device == Device::Cuda) {
      sync::check_policy_fits_device(*p, spec, true);
      if (p->merge().delay > 0 || p->merge().transforms())
        return "--policy " + spec + ": delay=, outer= and compress= keep host copies of the averaged layers; not on --device cuda";
    }
    if (c.backend == BackendKind::Nccl && p->merge().compress != sync::Codec::None)
      return "--policy " + spec + ": compress= needs the byte channel of gloo or mpi, not nccl";
    sync::check_policy_fits_model(spec, layers, c.world);
  } catch (const UsageError& e) {
    return e.what();
  }
  return c.shrink_on_peer_loss ? shrink_refusal(spec) : std::string();
}

data::InputSpec input_spec_of(const models::Model& m, const std::string& spec) {
  data::InputSpec s;
  s.model = spec;
  s.x_shape = m.input_shape();
  s.tokens = m.takes_tokens();
  s.classes = s.tokens ? m.vocab() : m.num_classes();
  return s;
}

RunData load_run_data(const TrainConfig& cfg, const data::InputSpec& input) {
  RunData d;
  d.train = data::open_dataset(cfg.data, cfg.data_dir, true, input, cfg.seed);
  d.test = data::open_dataset(cfg.data, cfg.data_dir, false, input, cfg.seed);
  return d;
}

data::InputSpec resolve_and_validate(TrainConfig& c) {
  bool known = false;
  const std::string family = models::ModelSpec::parse(c.model).family();  // NAME[:key=value,...]
  for (auto& m : models::model_names()) known |= (m == family);
  if (!known)
    throw UsageError("--model: unknown model '" + family + "' (expected mlp, cnn, resnet20, gpt-mini, gpt2, llama, "
                     "resnet18 or resnet50)");
  const bool language_model = family == "gpt-mini" || family == "gpt2" || family == "llama";
  if (c.data != "fashion-mnist" && c.data != "text" && c.data != "synthetic")
    throw UsageError("--data: unknown dataset '" + c.data + "' (expected fashion-mnist, text or synthetic)");
  if (c.batch < 1 || c.batch > 1 << 20) throw UsageError("--batch must be between 1 and 1048576");
  if (c.steps < 1) throw UsageError("--steps must be >= 1");
  if (c.optimizer == OptimizerKind::Auto) c.optimizer = language_model ? OptimizerKind::AdamW : OptimizerKind::Sgd;
  if (c.lr < 0) c.lr = c.optimizer == OptimizerKind::AdamW ? 1e-3f : 0.05f;
  if (!(c.lr > 0) || !std::isfinite(c.lr)) throw UsageError("--lr must be a positive number");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw UsageError("--momentum must be in [0, 1)");
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay)) throw UsageError("--weight-decay must be >= 0");
  if (c.warmup < 0) c.warmup = c.steps / 50;
  if (c.eval_every < 0) throw UsageError("--eval-every must be >= 0");
  if (c.eval_samples < 0) throw UsageError("--eval-samples must be >= 0");
  if (c.checkpoint_every < 0) throw UsageError("--checkpoint-every must be >= 0");
  if (c.checkpoint_every > 0 && c.out.empty()) throw UsageError("--checkpoint-every needs --out (checkpoints go there)");
  if (!(c.timeout_s > 0) || c.timeout_s > 86400) throw UsageError("--timeout must be in (0, 86400] seconds");
  if (c.threads < 0 || c.threads > 1024) throw UsageError("--threads must be between 0 and 1024");
  if (c.threads == 0) {
    int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    c.threads = c.local_world > 1 ? 1 : hw;
  }
  if (!c.sensitivity.empty()) parse_sensitivity(c.sensitivity, c.steps);
  sync::make_policy(sync::PolicySpec::parse(c.policy));  // a bad spec is refused before any work
  sync::parse_switches(c.switches);
  if (!(c.anomaly_spike >= 0)) throw UsageError("--anomaly-spike must be >= 0");
  if (c.anomaly_window < 1) throw UsageError("--anomaly-window must be >= 1");
  if (c.inject_nan >= 0 && language_model)
    throw UsageError("--inject-nan poisons image inputs; " + family + " takes tokens");
  if (c.device == Device::Cuda) validate_cuda(c);
  if (c.backend == BackendKind::Nccl && c.device != Device::Cuda && c.world > 1)
    throw UsageError("--backend nccl reduces GPU memory: it needs --device cuda (or use --backend gloo or mpi)");
  if (c.shrink_on_peer_loss) check_shrink_fits(c);
  if (!c.control_file.empty()) sync::check_control_file_path("--control-file", c.control_file);
  if (c.bucket_cap_mb < 1 || c.bucket_cap_mb > 16384) throw UsageError("--bucket-cap-mb must be in [1, 16384]");
  if (!(c.first_bucket_mb > 0 && c.first_bucket_mb <= 16384)) throw UsageError("--first-bucket-mb must be in (0, 16384]");
  if (c.log_every < 0) throw UsageError("--log-every must be >= 0");
  if (c.staleness_gamma != 0 && !(c.staleness_gamma > 0 && c.staleness_gamma <= 1))
    throw UsageError("--staleness-lr must be in (0, 1]");
  // Model-dependent policy mistakes (a `fixed` pattern naming no layer, a profile of another model) are refused
  // here, before anything is written, also for a single process, which has no sync engine to find them.
  const auto probe = models::make_model(c.model, c.seed);
  sync::check_policy_fits_model(c.policy, probe->layers(), c.world);
  for (auto& sw : sync::parse_switches(c.switches)) sync::check_policy_fits_model(sw.spec, probe->layers(), c.world);
  data::InputSpec input = input_spec_of(*probe, c.model);
  data::check_fits(c.data, input);
  return input;
}

optim::OptimConfig optim_config(const TrainConfig& cfg) {
  optim::OptimConfig oc;
  oc.kind = name(cfg.optimizer);
  oc.momentum = cfg.momentum;
  oc.nesterov = cfg.nesterov;
  oc.weight_decay = cfg.weight_decay;
  return oc;
}

Trainer::Trainer(const TrainConfig& cfg, Backend* backend, RunData* data) : impl_(std::make_unique<Impl>()) {
  auto& I = *impl_;
  I.cfg = cfg;
  I.backend = backend;
  ops::set_threads(cfg.threads);
  I.model = models::make_model(cfg.model, cfg.seed);
  RunData loaded = data ? std::move(*data) : load_run_data(cfg, input_spec_of(*I.model, cfg.model));
  I.train = std::move(loaded.train);
  I.test = std::move(loaded.test);
  check_dataset_fits_model(I.train, *I.model);
  check_dataset_fits_model(I.test, *I.model);
  I.sharder = std::make_unique<data::Sharder>(I.train.size, cfg.seed, cfg.world, cfg.rank, cfg.batch);
  const optim::OptimConfig oc = optim_config(cfg);
  I.opt = std::make_unique<optim::Optimizer>(oc, *I.model);
  if (cfg.device == Device::Cuda) I.dev = make_device_state(cfg, *I.model, oc);
  I.sched.kind = name(cfg.lr_schedule);
  I.sched.base_lr = cfg.lr;
  I.sched.warmup = cfg.warmup;
  I.sched.total = cfg.steps;
  I.sched.validate();
}

Trainer::~Trainer() = default;

namespace {

// --device cuda: the step computes on the device state; the host model only supplies the layer count.
class DeviceCompute final : public StepCompute {
 public:
  DeviceCompute(DeviceState& dev, const data::Batch& batch, int layers) : dev_(dev), batch_(batch), layers_(layers) {}
  models::ForwardResult forward() override { return dev_.forward(batch_, true); }
  void backward(nn::BackwardHook* hook) override { dev_.backward(hook); }
  void update_layer(int layer, float lr) override { dev_.update_layer(layer, lr); }
  int num_layers() const override { return layers_; }

 private:
  DeviceState& dev_;
  const data::Batch& batch_;
  int layers_;
};

// The anomaly guard around the step (--anomaly fallback|stop; both update paths alike): a layer with a
// non-finite gradient is not updated, and the step's anomaly is reported to the engine (before after_update,
// whose control votes carry it), written to /events and shown.
class GuardWatch final : public StepWatch {
 public:
  GuardWatch(const TrainConfig& cfg, models::Model& m, bool on_device, sync::SyncEngine* engine,
             telemetry::MetricsWriter* metrics, Progress& progress)
      : on_(cfg.anomaly != AnomalyMode::Off), scan_(!on_device), rank0_(cfg.rank == 0), m_(m), engine_(engine),
        metrics_(metrics), progress_(progress), guard_(cfg.anomaly_spike, 20) {}
  void set_step(int64_t step) { step_ = step; }
  void set_engine(sync::SyncEngine* e) { engine_ = e; }  // a shrink built a new one
  // This rank saw an anomaly in the previous step (what a single process acts on; ranks agree via the engine).
  bool take_local_anomaly() { return std::exchange(local_anomaly_, false); }

  bool admit(int l) override { return !on_ || !scan_ || guard_.admit_layer(m_, l); }
  void after_updates(const models::ForwardResult& fr) override {
    if (!on_) return;
    const std::string what = guard_.finish_step(fr.loss);  // on a device only the loss is checked
    if (what.empty()) return;
    if (engine_) engine_->report_anomaly();
    local_anomaly_ = true;
    if (metrics_) metrics_->append_event(step_, "anomaly-local", what);
    if (rank0_) progress_.message("anomaly at step " + std::to_string(step_) + " on rank 0: " + what);
  }

 private:
  const bool on_, scan_, rank0_;
  models::Model& m_;
  sync::SyncEngine* engine_;

  telemetry::MetricsWriter* metrics_;
  Progress& progress_;
  AnomalyGuard guard_;
  int64_t step_ = 0;
  bool local_anomaly_ = false;
};

// Throughput bookkeeping: timed steps start at `warm` (after a short warm-up and any self-profiling steps);
// evaluation time after it is excluded.
struct Throughput {
  int64_t start = 0, warm = 0;
  int64_t end = -1;          // periodic policies: timed steps are [warm, end), whole periods; -1: to the last step
  int64_t period = 0, periods = 0;  // periodic policies: H and the whole periods timed
  std::string note;          // set when the timed window is too short for a steady figure (timed_window_note)
  double t_start = 0, t_warm = 0;
  double t_end = 0, eval_end_s = 0;  // the end of step end - 1, and the evaluation time inside [warm, end)
  double eval_s = 0, exposed_s = 0, step_s = 0;
  int64_t comm_bytes = 0;
  double exposed_fraction() const { return step_s > 0 ? exposed_s / step_s : 0; }

  // A step that ran from t0 to t_end with these communication stats; returns the samples/s so far (over the
  // timed steps once they started, else since the start).
  double add_step(const TrainConfig& cfg, int64_t step, double t0, double t_end, const sync::StepCommStats& cs) {
    comm_bytes += cs.bytes;
    if (step >= warm) {
      exposed_s += cs.exposed_ms / 1e3;
      step_s += t_end - t0;
    }
    return step >= warm && t_end > t_warm ? double(step + 1 - warm) * cfg.batch * cfg.world / (t_end - t_warm - eval_s)
                                          : double(step + 1 - start) * cfg.batch * cfg.world / (t_end - t_start);
  }
};

// summary.json: the configuration's key figures, throughput over the timed steps, the last loss and evaluation.
nlohmann::json run_summary(const TrainConfig& cfg, const std::string& backend, int64_t params, Throughput tp,
                           float loss, const nlohmann::json& last_eval) {
  const bool window = tp.end > tp.warm && tp.t_end > 0;  // whole periods, timed to the end of the last one
  const double t_end = window ? tp.t_end - tp.eval_end_s : now_s() - tp.eval_s;
  const int64_t timed_steps = (window ? tp.end : cfg.steps) - tp.warm;
  if (timed_steps <= 0 && cfg.steps - tp.start <= 0) tp.t_warm = tp.t_start;
  nlohmann::json s;
  s["model"] = cfg.model;
  s["policy"] = cfg.policy;
  s["backend"] = backend;
  s["device"] = name(cfg.device);
  s["world"] = cfg.world;
  s["batch"] = cfg.batch;
  s["steps"] = cfg.steps;
  s["params"] = params;
  s["threads"] = cfg.threads;
  s["seed"] = cfg.seed;
  s["samples_per_s"] = timed_steps > 0 && t_end > tp.t_warm
                           ? double(timed_steps) * cfg.batch * cfg.world / (t_end - tp.t_warm)
                           : double(cfg.steps - tp.start) * cfg.batch * cfg.world / (t_end - tp.t_start);
  s["step_ms"] = timed_steps > 0 ? (t_end - tp.t_warm) / double(timed_steps) * 1e3
                                 : (t_end - tp.t_start) / double(std::max<int64_t>(1, cfg.steps - tp.start)) * 1e3;
  s["timed_steps"] = nlohmann::json::array({tp.warm, window ? tp.end : cfg.steps});  // [first, end)
  if (tp.period > 0) s["timed_periods"] = tp.periods;
  if (!tp.note.empty()) s["timed_note"] = tp.note;
  s["wall_s"] = (window ? now_s() - tp.eval_s : t_end) - tp.t_start;
  s["final_loss"] = loss;
  for (auto& [k, v] : last_eval.items()) s[k] = v;
  s["comm_bytes"] = tp.comm_bytes;
  s["exposed_comm_fraction"] = tp.exposed_fraction();
  // This rank's peak resident memory so far (the whole run: model, optimizer, data, engine copies in flight).
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) s["peak_rss_mb"] = double(ru.ru_maxrss) / 1024.0;
  return s;
}

}  // namespace

// An anomaly seen by any rank a step or two ago, agreed through the control all-reduce (a single process: its
// own of the previous step): stop with a checkpoint, or fall back to lock-step.
void Trainer::Impl::on_agreed_anomaly(int64_t step, int anomalies, int64_t seen_at, RunRecorder& rec,
                                      Progress& progress) {
  const std::string what = std::to_string(anomalies) + " rank(s) saw an anomaly at step " + std::to_string(seen_at);
  if (cfg.anomaly == AnomalyMode::Stop) {
    std::string where = "no --out, no checkpoint";
    if (!cfg.out.empty()) {
      if (dev) dev->to_host(*model, *opt);
      // Without the probe: it has already run this step's before_step, so its state is not "after step - 1";
      // a resume re-measures nothing of the open probe, which the metrics import drops.
      write_checkpoint(checkpoint_path(cfg.out, cfg.rank), cfg, step - 1, *model, *opt, engine.get(), nullptr,
                       sharder->position_of(step));
      where = "checkpoint " + checkpoint_path(cfg.out, cfg.rank);
    }
    if (auto* w = rec.metrics()) w->append_event(seen_at, "anomaly", what + "; stop (" + where + ")");
    rec.finish_partial();
    throw AnomalyStop(what + "; " + where);
  }
  const std::string window = std::to_string(cfg.anomaly_window) + " steps";
  if (auto* w = rec.metrics()) w->append_event(seen_at, "anomaly", what + "; fallback to lock-step for " + window);
  if (rank0()) progress.message("anomaly: " + what + "; averaging once, then lock-step for " + window);
  if (engine) engine->fallback(cfg.anomaly_window);
}

void Trainer::Impl::checkpoint(int64_t step, RunRecorder& rec, const SensitivityProbe* probe) {
  if (dev) dev->to_host(*model, *opt);
  write_checkpoint(checkpoint_path(cfg.out, cfg.rank), cfg, step, *model, *opt, engine.get(), probe,
                   sharder->position_of(step + 1));
  // Publish the metrics up to this step too: a resume from this checkpoint continues them.
  if (auto* w = rec.metrics()) {
    w->append_event(step, "checkpoint", checkpoint_path(cfg.out, cfg.rank));
    w->flush();
  }
}

nlohmann::json Trainer::Impl::evaluate_now(int64_t step) {
  if (step + 1 == cfg.steps && engine) engine->finalize();
  if (!dev) return evaluate(*model, test, cfg, engine.get());
  nlohmann::json ev;  // the consensus is formed on the device; the host model evaluates a copy of it
  auto on_host = [&] {
    dev->params_to_host(*model);
    ev = evaluate(*model, test, cfg, nullptr);
  };
  if (engine) engine->with_consensus(on_host);
  else on_host();
  return ev;
}

nlohmann::json Trainer::run() {
  auto& I = *impl_;
  auto& cfg = I.cfg;
  auto& model = *I.model;
  Progress progress(cfg.steps, cfg.log_every);
  // The probe first (it only picks its batch): a checkpoint's probe state is checked with everything else.
  std::unique_ptr<SensitivityProbe> probe;
  if (!cfg.sensitivity.empty())
    probe = std::make_unique<SensitivityProbe>(parse_sensitivity(cfg.sensitivity, cfg.steps), model, I.train,
                                               cfg.seed, cfg.steps, I.backend);
  // A checkpoint is checked in full (and loaded) before anything is written: a refused one changes nothing.
  // Same world size: each rank its own file of the newest common step (agreed, collective). Another world size
  // (docs/elastic.md): every rank rank 0's file, and the data order continues at the samples consumed so far.
  const ResumePlan plan = cfg.resume.empty() ? ResumePlan{} : plan_resume(cfg.resume, cfg);
  const std::string resume_file = cfg.resume.empty() ? ""
                                  : plan.same_world ? choose_checkpoint(cfg.resume, cfg.rank, I.backend)
                                                    : plan.path;
  int64_t data_position = 0;
  const int64_t resume_after =
      cfg.resume.empty() ? -1
                         : read_checkpoint(resume_file, cfg, model, *I.opt, nullptr, probe.get(), plan.from_world,
                                           plan.from_rank, &data_position);
  if (resume_after >= 0) I.sharder->continue_at(resume_after + 1, data_position);
  if (I.dev && resume_after >= 0) I.dev->from_host(model, *I.opt);
  RunRecorder rec(cfg, model, I.backend, resume_after);  // metrics.h5 rows (continued when resuming)
  if (probe) probe->attach(rec.metrics());
  // A restart by `dreamddp launch --max-restarts` (docs/elastic.md): why and from where, in /events.
  if (const char* why = std::getenv("DREAMDDP_RESTART"); why && *why)
    if (auto* w = rec.metrics()) w->append_event(resume_after, "restart", why);
  Throughput tp;
  // A joiner (docs/elastic.md "Rejoin") takes the live world's state from its rank 0; a rank started with the
  // run builds its engine (whose construction broadcasts rank 0's parameters).
  const bool joining = I.shrink && I.shrink->joining;
  if (joining) tp.start = I.admit(/*joiner=*/true, rec);
  else if (I.backend)
    I.engine = make_engine_for(cfg, model, *I.opt, *I.backend, rec.metrics(), I.dev.get(), 0, I.profile_carry,
                               nullptr, I.undo());
  rec.set_hosts(I.engine ? I.engine->hosts() : std::vector<std::string>{});
  if (!cfg.resume.empty()) {
    // Again, now with the engine (its construction broadcast rank 0's parameters over the loaded ones); the
    // probe's state is loaded already.
    tp.start = read_checkpoint(resume_file, cfg, model, *I.opt, I.engine.get(), nullptr, plan.from_world,
                               plan.from_rank) + 1;
    if (I.dev) I.dev->from_host(model, *I.opt);
    if (I.rank0()) progress.message("resumed from " + resume_file + " after step " + std::to_string(tp.start - 1));
    if (!plan.same_world) {
      const std::string what = std::to_string(plan.from_world) + " -> " + std::to_string(cfg.world) +
                               " ranks, every rank from rank 0's state; data continues at sample position " +
                               std::to_string(data_position) + ", global batch " +
                               std::to_string(int64_t(plan.from_world) * cfg.batch) + " -> " +
                               std::to_string(int64_t(cfg.world) * cfg.batch);
      if (auto* w = rec.metrics()) w->append_event(tp.start - 1, "resume-world", what);
      if (I.rank0()) progress.message("resume on another world size: " + what);
    }
  }
  sync::SyncEngine* engine = I.engine.get();
  GuardWatch guard(cfg, model, I.dev != nullptr, engine, rec.metrics(), progress);
  std::vector<int64_t> idx(cfg.batch);
  models::Input in;  // this step's batch as the host model sees it (refilled every step)
  HostCompute host(model, *I.opt, in);
  std::unique_ptr<DeviceCompute> device;
  if (I.dev) device = std::make_unique<DeviceCompute>(*I.dev, I.batch, model.num_layers());
  StepCompute& compute = device ? static_cast<StepCompute&>(*device) : host;
  // Timed steps start after a short warm-up, and never before a self-profiling policy (dreamddp) has finished
  // its lock-step profiling steps and any measured trial: those are not the policy's throughput. A periodic
  // policy is timed over whole periods from a period boundary (each holds one average of every layer, whether the
  // schedule averages at the start of the period, layer-wise, or at its end, Local SGD), when the run has one.
  auto timing_policy = sync::make_policy(sync::PolicySpec::parse(cfg.policy));
  timing_policy->setup(sync::layer_metas(model.layers()), cfg.world);  // profile=DIR: no profiling steps
  const sync::TimedWindow timed = sync::timed_window(*timing_policy, tp.start, cfg.steps);
  tp.warm = timed.warm;
  tp.end = timed.end;
  tp.period = timed.period;
  tp.periods = timed.periods;
  tp.note = sync::timed_window_note(timed, cfg.steps);
  if (!tp.note.empty() && I.rank0()) progress.message("train: " + tp.note);
  if (I.shrink) {  // joiners are looked for once a period (or every 10 steps), never at the first step
    I.shrink->join_check = JoinCheck(timing_policy->period() > 0 ? timing_policy->period() : 10, tp.start);
  }
  tp.t_start = tp.t_warm = now_s();
  float loss = NAN;
  nlohmann::json last_eval;
  int64_t recorded = tp.start - 1;  // the last step with a /steps row (a step redone after a shrink has one)
  const PausePoints pauses;  // fault tests only (pause_points.h)
  for (int64_t step = tp.start; step < cfg.steps; ++step) {
    if (step == tp.warm) tp.t_warm = now_s();
    const double t0 = now_s();
    try {
      if (I.shrink && I.grow_world(step, rec, progress)) {
        engine = I.engine.get();
        guard.set_engine(engine);
      }
      I.sharder->indices(step, idx.data());
      data::gather(I.train, idx.data(), cfg.batch, &I.batch);
      if (step == cfg.inject_nan && cfg.rank == 0) I.batch.xf[0] = NAN;  // testing the anomaly guard: bad data
      in = make_input(I.batch);
      if (probe) probe->before_step(step, in);
      if (engine) engine->begin_step(step);
      const bool local_anomaly = guard.take_local_anomaly();
      const int anomalies = engine ? engine->agreed_anomalies() : (local_anomaly ? 1 : 0);
      if (anomalies > 0 && cfg.anomaly != AnomalyMode::Off)
        I.on_agreed_anomaly(step, anomalies, engine ? engine->agreed_anomaly_step() : step - 1, rec, progress);

      // The step (core/train/step.h): forward, backward with the hook, sync wait and update, after-update.
      const float lr = I.sched.at(step);
      guard.set_step(step);
      const StepResult r = train_step(compute, engine, lr, cfg.immediate_update, guard);

      loss = r.forward.loss;
      if (!std::isfinite(loss) && cfg.anomaly == AnomalyMode::Off)
        throw std::runtime_error("loss became " + std::to_string(loss) + " at step " + std::to_string(step) +
                                 " (try a smaller --lr)");
      const sync::StepCommStats cs = engine ? engine->step_stats() : sync::StepCommStats{};
      const double sps = tp.add_step(cfg, step, t0, r.end_s, cs), elapsed = r.end_s - tp.t_start;
      if (step + 1 == tp.end) tp.t_end = r.end_s, tp.eval_end_s = tp.eval_s;
      if (step > recorded)
        rec.step(telemetry::StepRow{step, elapsed, loss, lr, r.forward_ms, r.backward_ms, r.update_ms,
                                    cs.exposed_ms, cs.bytes, sps});
      recorded = std::max(recorded, step);
      if (I.rank0()) progress.update(step, loss, sps, tp.exposed_fraction(), elapsed);

      if (cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0 && !cfg.out.empty())
        I.checkpoint(step, rec, probe.get());
      if ((cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0) || step + 1 == cfg.steps) {
        const double te = now_s();
        last_eval = I.evaluate_now(step);
        if (step >= tp.warm) tp.eval_s += now_s() - te;
        rec.eval(step, last_eval);
        if (I.rank0()) progress.message(format_eval(step, last_eval));
      }
      pauses.after_step(step);
    } catch (const PeerLost& e) {
      if (!I.shrink || dynamic_cast<const QuorumLost*>(&e)) throw;
      const int64_t next = I.shrink_world(step, t0, e.what(), rec, progress);
      // Survivors may have failed in different steps (Local SGD's ranks run apart between averages): all go on at
      // the latest. Steps this rank skips were trained by the ranks ahead (their progress is in the average); each
      // keeps its /steps row, with what this rank did not measure as NaN.
      for (int64_t s = recorded + 1; s < next; ++s) {
        const double nan = std::nan("");
        rec.step(telemetry::StepRow{s, now_s() - tp.t_start, nan, I.sched.at(s), nan, nan, nan, nan, 0, nan});
        recorded = s;
      }
      step = next - 1;  // the loop's ++step: the step redone
      engine = I.engine.get();
      guard.set_engine(engine);
    }
  }
  progress.done();
  I.end_elastic();
  nlohmann::json s = run_summary(cfg, I.backend ? I.backend->name() : std::string("none"), model.num_params(), tp,
                                 loss, last_eval);
  if (!cfg.save_params.empty()) {
    if (I.dev) I.dev->params_to_host(model);
    // "%r": the rank this process started as (a shrink renumbers the ranks, not the files).
    save_params(model, cfg.save_params, I.shrink ? I.shrink->start_rank : cfg.rank);
  }
  rec.finish(s);
  return s;
}

}  // namespace dd::train
