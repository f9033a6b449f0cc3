// Names of SyncAction codes, shared by the HDF5 enum type and log messages.
#include "core/telemetry/rows.h"

namespace dd::telemetry {

const char* sync_action_name(SyncAction a) {
  switch (a) {
    case SyncAction::kNone: return "none";
    case SyncAction::kAverageParams: return "average_params";
    case SyncAction::kAllreduceGrads: return "allreduce_grads";
    case SyncAction::kControl: return "control";
    case SyncAction::kBroadcast: return "broadcast";
  }
  return "unknown";
}

}  // namespace dd::telemetry
