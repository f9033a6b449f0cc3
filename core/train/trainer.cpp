// Trainer: one rank's training loop. Single process when there is no backend; with a backend the sync engine
// hooks into backward and the update (core/sync).
#include "core/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <utility>

#include "backends/backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/sharder.h"
#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/sync_session.h"
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
#include "core/train/run_loop.h"
#include "core/train/run_dir.h"
#include "core/train/sensitivity.h"
#include "core/train/step.h"
#include "core/train/trainer_impl.h"
#include "core/train/trainer_parts.h"

namespace dd::train {


Trainer::Trainer(const TrainConfig& cfg, Backend* backend, RunData* data) : impl_(std::make_unique<Impl>()) {
  auto& I = *impl_;
  I.cfg = cfg;
  if (!policy_specs_current(I.cfg)) parse_policy_specs(I.cfg);  // changed after resolve_and_validate (tests do)
  I.backend = backend;
  ops::set_subnormals(cfg.subnormals);
  ops::set_precision(cfg.precision);
  ops::set_threads(cfg.threads);
  I.dev = make_device_state(cfg);  // the one training state lives on this device
  I.model = models::make_model(cfg.model, cfg.seed, I.dev->kernels());
  RunData loaded = data ? std::move(*data) : load_run_data(cfg, input_spec_of(*I.model, cfg.model));
  I.train = std::move(loaded.train);
  I.test = std::move(loaded.test);
  check_dataset_fits_model(I.train, *I.model);
  check_dataset_fits_model(I.test, *I.model);
  I.sharder = std::make_unique<data::Sharder>(I.train.size, cfg.seed, cfg.world, cfg.rank, cfg.batch);
  const optim::OptimConfig oc = optim_config(cfg);
  I.opt = std::make_unique<optim::Optimizer>(oc, *I.model);
  I.sched.kind = cfg.lr_schedule;
  I.sched.base_lr = cfg.lr;
  I.sched.warmup = cfg.warmup;
  I.sched.total = cfg.steps;
  I.sched.validate();
}

Trainer::~Trainer() = default;

RunData Trainer::release_data() {
  auto& I = *impl_;
  RunData d;
  d.train = std::move(I.train);
  d.test = std::move(I.test);
  return d;
}

void Trainer::attach(Backend* backend, int rank, int world) {
  auto& I = *impl_;
  I.backend = backend;
  I.cfg.rank = rank;
  I.cfg.world = world;  // the sharder is made for this place when the joiner is admitted (admit())
}


// An anomaly seen by any rank a step or two ago, agreed through the control all-reduce (a single process: its
// own of the previous step): stop with a checkpoint, or fall back to lock-step.
void Trainer::Impl::on_agreed_anomaly(int64_t step, int anomalies, int64_t seen_at, RunRecorder& rec,
                                      Progress& progress) {
  const std::string what = std::to_string(anomalies) + " rank(s) saw an anomaly at step " + std::to_string(seen_at);
  if (cfg.anomaly == AnomalyMode::Stop) {
    std::string where = "no --out, no checkpoint";
    if (!cfg.out.empty()) {
      // Without the probe: it has already run this step's before_step, so its state is not "after step - 1";
      // a resume re-measures nothing of the open probe, which the metrics import drops.
      write_checkpoint(checkpoint_path(cfg.out, cfg.rank), cfg, step - 1, *model, *opt, engine ? &engine->state : nullptr, nullptr,
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
  if (engine) engine->control.fallback(cfg.anomaly_window);
}

void Trainer::Impl::checkpoint(int64_t step, RunRecorder& rec, const SensitivityProbe* probe) {
  write_checkpoint(checkpoint_path(cfg.out, cfg.rank), cfg, step, *model, *opt, engine ? &engine->state : nullptr, probe,
                   sharder->position_of(step + 1));
  // Publish the metrics up to this step too: a resume from this checkpoint continues them.
  if (auto* w = rec.metrics()) {
    w->append_event(step, "checkpoint", checkpoint_path(cfg.out, cfg.rank));
    w->flush();
  }
}

nlohmann::json Trainer::Impl::evaluate_now(int64_t step) {
  if (step + 1 == cfg.steps && engine) engine->control.finalize();
  return evaluate(*model, test, cfg, engine ? &engine->control : nullptr);  // on the model's device, the consensus formed there
}

// Before the first step: the probe, a checkpoint to resume from, the metrics, the engine and the timed window.
void Trainer::Impl::start_run(RunLoop& L) {
  // The probe first (it only picks its batch): a checkpoint's probe state is checked with everything else.
  if (!cfg.sensitivity.empty())
    L.probe = std::make_unique<SensitivityProbe>(parse_sensitivity(cfg.sensitivity, cfg.steps), *model, train,
                                                 cfg.seed, cfg.steps, backend);
  // A checkpoint is checked (CRC, configuration, steps) before anything is written: a refused one changes nothing;
  // it is loaded once, after the engine exists. Same world size: each rank its own file of the newest common step
  // (agreed, collective). Another world size (docs/elastic.md): every rank rank 0's file, and the data order
  // continues at the samples consumed so far.
  const ResumePlan plan = cfg.resume.empty() ? ResumePlan{} : plan_resume(cfg.resume, cfg);
  const std::string resume_file = cfg.resume.empty() ? ""
                                  : plan.same_world ? choose_checkpoint(cfg.resume, cfg.rank, backend)
                                                    : plan.path;
  LoadedCheckpoint loaded;  // read and checked in full here, applied once the engine exists
  if (!cfg.resume.empty())
    loaded = parse_checkpoint(resume_file, cfg, *model, *opt, L.probe.get(), plan.from_world, plan.from_rank);
  const int64_t resume_after = loaded.step;
  L.rec = std::make_unique<RunRecorder>(cfg, *model, backend, resume_after);
  // A restart by `dreamddp launch --max-restarts` (docs/elastic.md): why and from where, in /events.
  if (const char* why = std::getenv("DREAMDDP_RESTART"); why && *why)
    if (auto* w = L.rec->metrics()) w->append_event(resume_after, "restart", why);
  // A joiner (docs/elastic.md "Rejoin") takes the live world's state from its rank 0; a rank started with the
  // run builds its engine (whose construction broadcasts rank 0's parameters).
  if (shrink && shrink->joining) {
    // A peer lost before this rank holds the whole state: it has nothing to go on with, and the live world goes on
    // without it (it shrinks as after any loss); started again, it asks anew.
    try {
      L.tp.start = admit(/*joiner=*/true, *L.rec);
      watch_world();
    } catch (const PeerLost& e) {
      throw PeerLost("rejoin: a peer was lost while rank " + std::to_string(shrink->start_rank) + " received its "
                     "state (" + std::to_string(heal.messages) + " messages, " + std::to_string(heal.bytes) +
                     " bytes so far); the live world goes on without it: " + e.what());
    }
  } else if (backend)
    engine = make_engine_for(cfg, *model, *opt, *backend, L.rec->metrics(), *dev, 0, profile_carry, nullptr,
                             undo());
  L.rec->set_hosts(engine ? engine->record.hosts() : std::vector<std::string>{});
  if (!cfg.resume.empty()) resume_with_engine(L, plan, loaded);
  if (L.probe) L.probe->attach(L.rec->metrics());  // records what a loaded probe state had measured
  L.guard = std::make_unique<GuardWatch>(cfg, *model, L.rec->metrics(), L.progress);
  L.idx.resize(size_t(cfg.batch));
  L.compute = std::make_unique<DeviceCompute>(*model, *opt, *dev, batch);
  time_window(L);
}

// The checkpoint, applied once the engine exists (its construction broadcast rank 0's initial parameters): model,
// optimizer and engine state, and where the data continues.
void Trainer::Impl::resume_with_engine(RunLoop& L, const ResumePlan& plan, const LoadedCheckpoint& c) {
  apply_checkpoint(c, *model, *opt, engine ? &engine->state : nullptr);
  L.tp.start = c.step + 1;
  const int64_t data_position = c.data_position;
  const std::string& file = c.path;
  sharder->continue_at(L.tp.start, data_position);
  if (rank0()) L.progress.message("resumed from " + file + " after step " + std::to_string(L.tp.start - 1));
  if (plan.same_world) return;
  const std::string what = std::to_string(plan.from_world) + " -> " + std::to_string(cfg.world) +
                           " ranks, every rank from rank 0's state; data continues at sample position " +
                           std::to_string(data_position) + ", global batch " +
                           std::to_string(int64_t(plan.from_world) * cfg.batch) + " -> " +
                           std::to_string(int64_t(cfg.world) * cfg.batch);
  if (auto* w = L.rec->metrics()) w->append_event(L.tp.start - 1, "resume-world", what);
  if (rank0()) L.progress.message("resume on another world size: " + what);
}

// Timed steps start after a short warm-up, and never before a self-profiling policy (dreamddp) has finished
// its lock-step profiling steps and any measured trial: those are not the policy's throughput. A periodic
// policy is timed over whole periods from a period boundary (each holds one average of every layer, whether the
// schedule averages at the start of the period, layer-wise, or at its end, Local SGD), when the run has one.
void Trainer::Impl::time_window(RunLoop& L) {
  auto timing_policy = sync::make_policy(cfg.policy_spec);
  timing_policy->setup(sync::layer_metas(model->layers()), cfg.world);  // profile=DIR: no profiling steps
  const sync::TimedWindow timed = sync::timed_window(*timing_policy, L.tp.start, cfg.steps, cfg.last_period_local);
  L.tp.warm = timed.warm;
  L.tp.end = timed.end;
  L.tp.period = timed.period;
  L.tp.periods = timed.periods;
  L.tp.note = sync::timed_window_note(timed, cfg.steps);
  if (!L.tp.note.empty() && rank0()) L.progress.message("train: " + L.tp.note);
  if (shrink) {  // joiners are looked for once a period (or every 10 steps), never at the first step
    shrink->join_check = JoinCheck(timing_policy->period() > 0 ? timing_policy->period() : 10, L.tp.start);
  }
  L.tp.t_start = L.tp.t_warm = now_s();
  L.recorded = L.tp.start - 1;
}

// One step: a grown world, the batch, the probe, the engine's step start and agreed anomalies, the step itself
// (core/train/step.h), then what follows it.
void Trainer::Impl::train_one(int64_t step, double t0, RunLoop& L) {
  if (shrink) grow_world(step, *L.rec, L.progress);
  sharder->indices(step, L.idx.data());
  data::gather(train, L.idx.data(), cfg.batch, &batch);
  if (step == cfg.inject_nan && cfg.rank == 0) batch.xf[0] = NAN;  // testing the anomaly guard: bad data
  if (L.probe) L.probe->before_step(step, batch);
  // Anomalies every rank agreed on (a single process: its own of the previous step).
  const bool local_anomaly = L.guard->take_local_anomaly();
  const sync::StepStart agreed = engine ? engine->step.begin(step) : sync::StepStart{local_anomaly ? 1 : 0, step - 1};
  if (agreed.anomalies > 0 && cfg.anomaly != AnomalyMode::Off)
    on_agreed_anomaly(step, agreed.anomalies, agreed.anomaly_step, *L.rec, L.progress);
  const float lr = sched.at(step);
  L.guard->set_step(step);
  const StepResult r = train_step(*L.compute, engine ? &engine->step : nullptr, lr, cfg.immediate_update, *L.guard);
  after_step(step, t0, lr, r, L);
}

// After a step: its row and progress line, a checkpoint and an evaluation when due.
void Trainer::Impl::after_step(int64_t step, double t0, float lr, const StepResult& r, RunLoop& L) {
  L.loss = r.forward.loss;
  if (!std::isfinite(L.loss) && cfg.anomaly == AnomalyMode::Off)
    throw std::runtime_error("loss became " + std::to_string(L.loss) + " at step " + std::to_string(step) +
                             " (try a smaller --lr)");
  auto& tp = L.tp;
  const sync::StepCommStats& cs = r.comm;
  const double sps = tp.add_step(cfg, step, t0, r.end_s, cs), elapsed = r.end_s - tp.t_start;
  if (step + 1 == tp.end) tp.t_end = r.end_s, tp.eval_end_s = tp.eval_s;
  if (step > L.recorded)
    L.rec->step(telemetry::StepRow{step, elapsed, L.loss, lr, r.forward_ms, r.backward_ms, r.update_ms,
                                   cs.exposed_ms, cs.bytes, sps});
  L.recorded = std::max(L.recorded, step);
  if (rank0()) L.progress.update(step, L.loss, sps, tp.exposed_fraction(), elapsed);
  if (cfg.checkpoint_every > 0 && (step + 1) % cfg.checkpoint_every == 0 && !cfg.out.empty())
    checkpoint(step, *L.rec, L.probe.get());
  if ((cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0) || step + 1 == cfg.steps) {
    const double te = now_s();
    L.last_eval = evaluate_now(step);
    if (step >= tp.warm) tp.eval_s += now_s() - te;
    L.rec->eval(step, L.last_eval);
    if (rank0()) L.progress.message(format_eval(step, L.last_eval));
  }
}

// A lost peer with --on-peer-loss shrink: the survivors' new world. Returns the step to redo. Survivors may have
// failed in different steps (Local SGD's ranks run apart between averages): all go on at the latest. Steps this
// rank skips were trained by the ranks ahead (their progress is in the average); each keeps its /steps row, with
// what this rank did not measure as NaN.
int64_t Trainer::Impl::recover(int64_t step, double t0, const PeerLost& e, RunLoop& L) {
  if (!shrink || dynamic_cast<const QuorumLost*>(&e)) throw;
  const int64_t next = shrink_world(step, t0, e.what(), *L.rec, L.progress);
  for (int64_t s = L.recorded + 1; s < next; ++s) {
    const double nan = std::nan("");
    L.rec->step(telemetry::StepRow{s, now_s() - L.tp.t_start, nan, sched.at(s), nan, nan, nan, nan, 0, nan});
    L.recorded = s;
  }
  return next;
}

// After the last step: the summary, --save-params and the run's files closed.
nlohmann::json Trainer::Impl::finish_run(RunLoop& L) {
  L.progress.done();
  end_elastic();
  nlohmann::json s = run_summary(cfg, backend ? backend->name() : std::string("none"), model->num_params(), L.tp,
                                 L.loss, L.last_eval);
  // The policy that ran at the end and every switch on the way: --policy alone would record the start only.
  s["policy_at_start"] = cfg.policy;
  s["switches"] = nlohmann::json::array();
  if (engine) {
    s["policy"] = engine->record.policy_in_force();
    for (const auto& c : engine->record.policy_changes())
      s["switches"].push_back({{"step", c.step}, {"policy", c.spec}, {"source", c.source}});
  }
  // The world the run started with, as metrics.h5 records it; a shrink or a rejoin changes it on the way.
  if (shrink) s["world"] = shrink->start_world;
  s["world_at_end"] = cfg.world;
  if (!cfg.save_params.empty()) {
    // "%r": the rank this process started as (a shrink renumbers the ranks, not the files).
    save_params(*model, cfg.save_params, shrink ? shrink->start_rank : cfg.rank);
  }
  L.rec->finish(s);
  return s;
}

nlohmann::json Trainer::run() {
  auto& I = *impl_;
  RunLoop L(I.cfg);
  I.start_run(L);
  const PausePoints pauses;  // fault tests only (pause_points.h)
  for (int64_t step = L.tp.start; step < I.cfg.steps; ++step) {
    if (step == L.tp.warm) L.tp.t_warm = now_s();
    const double t0 = now_s();
    try {
      I.train_one(step, t0, L);
      pauses.after_step(step);
    } catch (const PeerLost& e) {
      step = I.recover(step, t0, e, L) - 1;  // the loop's ++step: the step redone
    }
  }
  return I.finish_run(L);
}

}  // namespace dd::train
