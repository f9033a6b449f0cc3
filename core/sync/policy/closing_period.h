// The last period of a run (docs/design.md "Sync semantics"). A periodic policy that averages layers inside its
// periods (plsgd, dreamddp) leaves every layer trained on after its last average, so the run ends on the closing
// average of the layers that differ (LayerSync::finalize). The averages of the last period are then followed by
// that one anyway: by default its layers stay local through it and the closing average is their sync, as Local
// SGD's last period ends on its whole-model average. Under a transformed merge (outer=nesterov, compress=) that
// closing sync is the merge's (LayerSync::closing_merge), as Local SGD's with an outer step ends on that step. Not
// for a policy whose whole-model average closes the run (Local SGD: there is nothing to leave).
#pragma once
#include <cstdint>

#include "core/sync/policy/policy.h"

namespace dd::sync {

// The first step of the period holding `last_step` whose averages `p` leaves to the closing average; -1 when it
// leaves none (`last_step` unknown (< 0), no period, or a whole-model average after `last_step`).
inline int64_t closing_period_start(const Policy& p, int64_t last_step) {
  const int64_t H = p.period();
  if (last_step < 0 || H <= 0 || p.full_average_after(last_step)) return -1;
  return last_step / H * H;
}

}  // namespace dd::sync
