// The pieces of the training loop that are not the loop itself: batch adaptation, evaluation, parameter
// export, the per-run recorder (metrics.h5 + summary.json), and the sync-engine factory.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/data/dataset.h"
#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/in_place_undo.h"
#include "core/sync/engine/sync_session.h"
#include "core/sync/profile/profile_carry.h"
#include "core/telemetry/rows.h"
#include "core/train/config.h"

namespace dd {
class Backend;
}

namespace dd::telemetry {
class MetricsWriter;
}

namespace dd::train {

// The optimizer of a resolved configuration (its kind no longer auto).
optim::OptimConfig optim_config(const TrainConfig& cfg);

// Refuses a dataset whose inputs do not match the model (dd::UsageError).
void check_dataset_fits_model(const data::Dataset& d, const models::Model& m);
models::Input make_input(const data::Batch& b);

// Test-set evaluation (eval mode) on the consensus model: with an engine, on a rank-averaged copy of parameters
// and buffers; training state is untouched. Returns {"test_loss", "test_accuracy"} (+ "perplexity" for text).
nlohmann::json evaluate(models::Model& m, const data::Dataset& test, const TrainConfig& cfg, sync::RunControl* e);
std::string format_eval(int64_t step, const nlohmann::json& ev);

// docs/cli.md --save-params: raw little-endian float32, layers in forward order, weight then bias (BatchNorm:
// then running mean and var). "%r" in path is replaced by the rank and every rank writes; otherwise rank 0.
void save_params(models::Model& m, const std::string& path, int rank);

// Why `spec`, read from --control-file while the run goes on, cannot be switched to ("" when it can): what --policy
// and --switch are refused for beyond parsing (the device, the model, --on-peer-loss shrink), so the three agree.
std::string control_spec_refusal(const TrainConfig& c, const std::vector<nn::Layer*>& layers,
                                 const sync::PolicySpec& spec);

// The engine over m's and o's arenas on their device; `dev` says how collectives run there. Unless `state_equal`,
// the engine broadcasts rank 0's parameters and buffers at its construction when their hashes differ across ranks.
class DeviceState;
std::unique_ptr<sync::SyncSession> make_engine_for(const TrainConfig& cfg, models::Model& m, optim::Optimizer& o,
                                                  Backend& b, telemetry::MetricsWriter* metrics, DeviceState& dev,
                                                  int64_t first_step = 0,
                                                  std::shared_ptr<sync::ProfileCarry> profile_out = nullptr,
                                                  const sync::ProfileCarry* profile_in = nullptr,
                                                  std::shared_ptr<sync::InPlaceUndo> undo = nullptr,
                                                  bool state_equal = false);


// Rank 0 records the run: metrics.h5 (/steps, /eval, /layers, root attributes) and, at the end, summary.json.
class RunRecorder {
 public:
  // resume_after >= 0: continue OUT/metrics.h5, keeping its rows up to that step.
  RunRecorder(const TrainConfig& cfg, models::Model& m, Backend* b, int64_t resume_after = -1);
  ~RunRecorder();
  // Host name of every rank (root attribute "hosts"), known once the engine has gathered them; empty: this host.
  void set_hosts(const std::vector<std::string>& hosts);
  void step(const telemetry::StepRow& r);
  telemetry::MetricsWriter* metrics();  // null on ranks other than 0
  void eval(int64_t step, const nlohmann::json& ev);
  void finish(const nlohmann::json& summary);
  void finish_partial();  // publish what was recorded (the run stops early)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dd::train
