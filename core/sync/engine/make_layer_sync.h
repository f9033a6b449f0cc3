// make_layer_sync: builds LayerSync, the layer-wise partial-synchronization engine (docs/design.md "Sync
// semantics", "Buckets and overlap"): per step, it asks the policy what each layer does, fuses layers into
// buckets, launches them from the backward hook on the backend's communication thread, and waits only before the update.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/control/control_file.h"
#include "core/sync/engine/in_place_undo.h"
#include "core/sync/engine/sync_session.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/policy/policy_spec.h"
#include "core/sync/profile/profile_carry.h"
#include "core/sync/types/bucket_plan.h"
#include "core/sync/types/contention.h"
#include "core/sync/types/data_path.h"

namespace dd {
class Backend;
namespace telemetry {
class MetricsWriter;
}
}  // namespace dd

namespace dd::sync {

struct EngineOptions {
  PolicySpec policy = PolicySpec::parse("ddp");  // parsed by the caller (PolicySpec::parse), once
  std::vector<PolicySwitch> switches;        // --switch values, parsed (parse_switches)
  int64_t bucket_cap_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;
  bool check_collectives = false;            // fingerprint every collective across ranks (debug)
  double staleness_gamma = 0;                // >0: lr_l = lr * gamma^stale_l
  bool average_optimizer_state = false;      // average momentum / Adam moments with the parameters
  telemetry::MetricsWriter* metrics = nullptr;  // rank 0: timeline rows
  bool anomaly_votes = false;                // carry the anomaly flag in the control all-reduce
  std::string control_file;                  // rank 0 watches it: a policy spec written there is switched to
  SpecCheck control_check;                   // why a spec read there cannot be switched to in this run ("": it can)
  bool verbose = true;                       // rank 0 prints the plan
  int64_t first_step = 0;                    // the first step: 0, or where a world rebuilt after a lost peer goes on
  std::string host_name;                     // this rank's host as hier nodes=auto groups it ("": gethostname)
  // The contention a self-profile charges (dreamddp): measured on this machine when unset; a simulation, whose
  // compute is not the host's, hands it the profile's overlap.json (or none).
  bool contention_given = false;
  Contention contention;
  // Across a change of world size (profile_carry.h): the agreed self-profile is written to profile_out when one is
  // measured; profile_in (the same on every rank: the caller checks) is scaled to this world and given to the first
  // policy instead of its profiling steps.
  std::shared_ptr<ProfileCarry> profile_out;
  const ProfileCarry* profile_in = nullptr;
  // --on-peer-loss shrink (in_place_undo.h): in-place averages on the training state keep what they overwrite, so
  // that a collective a lost peer left unfinished can be undone. Null: nothing is kept.
  std::shared_ptr<InPlaceUndo> undo;
  // Every rank already holds rank 0's parameters and buffers bitwise (a rejoin moved them layer by layer and checks
  // them by hash): the engine skips its initial broadcast of them. Otherwise it compares their CRC-32s across ranks
  // and broadcasts only when they differ.
  bool state_equal = false;
  // The run's last step (-1: not known): the averages of its last period are left to the closing average
  // (closing_period.h), unless the period is observed for a profile.
  int64_t last_step = -1;
};

// The layers as the engine sees them: per layer (forward order) what a policy may know, and its arena ranges.
struct LayerTable {
  std::vector<LayerMeta> meta;
  std::vector<LayerRange> ranges;
  int size() const { return int(meta.size()); }
};
LayerTable layer_table(const models::Model& m);

// The arenas of a model and its optimizer, on their device.
Arenas arenas_of(models::Model& m, optim::Optimizer& opt);

// Host arenas: the model's and the optimizer's own (CPU training).
std::unique_ptr<SyncSession> make_layer_sync(const EngineOptions& o, models::Model& m, optim::Optimizer& opt,
                                            Backend& b);
// Arenas elsewhere (a device, or a simulation's): `layers` in the arenas' layout; `a` the arenas; `dp` how to run
// collectives on them (the engine owns it).
std::unique_ptr<SyncSession> make_layer_sync(const EngineOptions& o, const LayerTable& layers, const Arenas& a,
                                            std::unique_ptr<DataPath> dp, Backend& b);

}  // namespace dd::sync
