// make_layer_sync: builds LayerSync, the layer-wise partial-synchronization engine (docs/design.md "Sync
// semantics", "Buckets and overlap"): per step, it asks the policy what each layer does, fuses layers into
// buckets, launches them from the backward hook on the backend's communication thread, and waits only before the update.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/data_path.h"
#include "core/sync/engine/sync_engine.h"

namespace dd {
class Backend;
namespace telemetry {
class MetricsWriter;
}
}  // namespace dd

namespace dd::sync {

struct EngineOptions {
  std::string policy = "ddp";
  std::vector<std::string> switches;         // "STEP:SPEC"
  int64_t bucket_cap_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;
  bool check_collectives = false;            // fingerprint every collective across ranks (debug)
  double staleness_gamma = 0;                // >0: lr_l = lr * gamma^stale_l
  bool average_optimizer_state = false;      // average momentum / Adam moments with the parameters
  telemetry::MetricsWriter* metrics = nullptr;  // rank 0: timeline rows
  bool anomaly_votes = false;                // carry the anomaly flag in the control all-reduce
  std::string control_file;                  // rank 0 watches it: a policy spec written there is switched to
  bool verbose = true;                       // rank 0 prints the plan
  int64_t first_step = 0;                    // the first step: 0, or where a world rebuilt after a lost peer goes on
};

// Host arenas: the model's and the optimizer's own (CPU training).
std::unique_ptr<SyncEngine> make_layer_sync(const EngineOptions& o, models::Model& m, optim::Optimizer& opt,
                                            Backend& b);
// Arenas elsewhere (a device): `m` supplies only the layer table; `a` the arenas in its layout; `dp` how to run
// collectives on them (the engine owns it). Policies that read local gradients on the host are refused
// (dd::UsageError) when dp->on_device().
std::unique_ptr<SyncEngine> make_layer_sync(const EngineOptions& o, models::Model& m, const Arenas& a,
                                            std::unique_ptr<DataPath> dp, Backend& b);

}  // namespace dd::sync
