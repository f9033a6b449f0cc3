// The training loop's state across steps (Trainer::run and its parts in trainer.cpp): where a step computes, the
// anomaly guard around it, throughput bookkeeping, and what the loop carries from one step to the next.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/models/model.h"
#include "core/sync/engine/sync_engine.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/anomaly.h"
#include "core/train/config.h"
#include "core/train/device_state.h"
#include "core/train/progress.h"
#include "core/train/sensitivity.h"
#include "core/train/step.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

// The step on the rank's device: the batch put in its memory, the model's forward and backward (the device's hook
// before the engine's), the optimizer's layer update. The device's hook is composed once per engine (a new one
// after a shrink or a rejoin), not at every step: a gradient's route from the layer to the engine does not pass
// through the device's code.
class DeviceCompute final : public StepCompute {
 public:
  DeviceCompute(models::Model& m, optim::Optimizer& o, DeviceState& dev, const data::Batch& batch)
      : m_(m), o_(o), dev_(dev), batch_(batch) {}
  models::ForwardResult forward() override { return m_.forward(dev_.upload(batch_), true); }
  void backward(nn::BackwardHook* engine) override {
    if (!composed_ || engine != engine_) hook_ = dev_.hook(engine), engine_ = engine, composed_ = true;
    m_.backward(hook_);
  }
  void update_layer(int layer, float lr) override { o_.update_layer(layer, lr); }
  int num_layers() const override { return m_.num_layers(); }

 private:
  models::Model& m_;
  optim::Optimizer& o_;
  DeviceState& dev_;
  const data::Batch& batch_;
  bool composed_ = false;
  nn::BackwardHook* engine_ = nullptr;  // the engine hook_ was composed for
  nn::BackwardHook* hook_ = nullptr;
};

// The anomaly guard around the step (--anomaly fallback|stop; both update paths alike): a layer with a
// non-finite gradient is not updated, and the step's anomaly is reported to the engine (its end(), whose control
// votes carry it), written to /events and shown.
class GuardWatch final : public StepWatch {
 public:
  GuardWatch(const TrainConfig& cfg, models::Model& m, telemetry::MetricsWriter* metrics, Progress& progress)
      : on_(cfg.anomaly != AnomalyMode::Off), rank0_(cfg.rank == 0), m_(m), metrics_(metrics), progress_(progress),
        guard_(cfg.anomaly_spike, 20) {}
  void set_step(int64_t step) { step_ = step; }
  // This rank saw an anomaly in the previous step (what a single process acts on; ranks agree via the engine).
  bool take_local_anomaly() { return std::exchange(local_anomaly_, false); }

  bool admit(int l) override { return !on_ || guard_.admit_layer(m_, l); }
  bool after_updates(const models::ForwardResult& fr) override {
    if (!on_) return false;
    const std::string what = guard_.finish_step(fr.loss);
    if (what.empty()) return false;
    local_anomaly_ = true;
    if (metrics_) metrics_->append_event(step_, "anomaly-local", what);
    if (rank0_) progress_.message("anomaly at step " + std::to_string(step_) + " on rank 0: " + what);
    return true;
  }

 private:
  const bool on_, rank0_;
  models::Model& m_;
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
                           float loss, const nlohmann::json& last_eval);

// What Trainer::run carries from step to step.
struct RunLoop {
  explicit RunLoop(const TrainConfig& cfg) : progress(cfg.steps, cfg.log_every) {}
  Progress progress;
  std::unique_ptr<SensitivityProbe> probe;
  std::unique_ptr<RunRecorder> rec;  // metrics.h5 rows, continued when resuming
  Throughput tp;
  std::unique_ptr<GuardWatch> guard;
  std::unique_ptr<StepCompute> compute;
  float loss = NAN;
  nlohmann::json last_eval;
  int64_t recorded = -1;  // the last step with a /steps row (a step redone after a shrink has one)
  std::vector<int64_t> idx;  // this step's sample indices
};

}  // namespace dd::train
