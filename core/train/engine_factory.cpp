// Builds the sync engine for a multi-rank run from the --policy spec, over the arenas of the model and optimizer
// on their device.
#include <string>

#include "base/error.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/train/device_state.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

std::unique_ptr<sync::SyncSession> make_engine_for(const TrainConfig& cfg, models::Model& m, optim::Optimizer& o,
                                                  Backend& b, telemetry::MetricsWriter* metrics, DeviceState& dev,
                                                  int64_t first_step, std::shared_ptr<sync::ProfileCarry> profile_out,
                                                  const sync::ProfileCarry* profile_in,
                                                  std::shared_ptr<sync::InPlaceUndo> undo, bool state_equal) {
  sync::EngineOptions eo;
  eo.policy = cfg.policy_spec;
  eo.switches = cfg.policy_switches;
  eo.bucket_cap_bytes = cfg.bucket_cap_mb << 20;
  eo.first_bucket_bytes = int64_t(cfg.first_bucket_mb * double(1 << 20));
  eo.check_collectives = cfg.check_collectives;
  eo.staleness_gamma = cfg.staleness_gamma;
  eo.average_optimizer_state = cfg.average_optimizer_state;
  eo.metrics = metrics;
  eo.anomaly_votes = cfg.anomaly != AnomalyMode::Off;
  eo.control_file = cfg.control_file;
  eo.control_check = [cfg, layers = m.layers()](const sync::PolicySpec& spec) { return control_spec_refusal(cfg, layers, spec); };
  eo.verbose = cfg.rank == 0;
  eo.first_step = first_step;
  eo.profile_out = std::move(profile_out);
  eo.profile_in = profile_in;
  eo.undo = std::move(undo);
  eo.last_step = cfg.last_period_local ? cfg.steps - 1 : -1;
  eo.state_equal = state_equal;
  const sync::Arenas a = sync::arenas_of(m, o);  // the model's and the optimizer's own, on their device
  return sync::make_layer_sync(eo, sync::layer_table(m), a, dev.data_path(a, m.num_layers(), b), b);
}

}  // namespace dd::train
