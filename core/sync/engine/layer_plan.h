// LayerPlan: what each layer does this step (one part of LayerSync, layer_sync.h): the policy's actions, which
// layers are lock-step (identical on every rank), their staleness, which averages of this step are delayed, and
// the lock-step window of an anomaly fallback.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/sync/types/bucket_plan.h"

namespace dd::sync {

struct LayerPlan {
  explicit LayerPlan(int layers)
      : actions(size_t(layers), Action::None), lockstep(size_t(layers), true), stale(size_t(layers), 0) {}
  int size() const { return int(actions.size()); }
  // The layers that are not lock-step (they differ across ranks).
  std::vector<bool> local_layers() const {
    std::vector<bool> local(lockstep.size());
    for (size_t l = 0; l < lockstep.size(); ++l) local[l] = !lockstep[l];
    return local;
  }
  // With delay=T this step's parameter averages are merged T steps later: their layers are updated locally now.
  void mark_delayed(const std::vector<Bucket>& buckets, int delay) {
    delayed_now.assign(actions.size(), false);
    if (delay > 0)
      for (auto& bk : buckets)
        if (averages_params(bk.action))
          for (int l = bk.lo; l <= bk.hi; ++l) delayed_now[size_t(l)] = true;
  }
  // Updated at once in an immediate update: no collective of this step guards the layer.
  bool local_now(int l) const { return actions[size_t(l)] == Action::None || delayed_now[size_t(l)]; }
  // The staleness scaling of layer l's learning rate: gamma^stale (1 when gamma is 0, off).
  float lr_factor(int l, double gamma) const {
    return gamma > 0 ? float(std::pow(gamma, double(stale[size_t(l)]))) : 1.0f;
  }
  // An anomaly fallback: every layer lock-step from now until step `until`, staleness reset.
  void fall_back(int64_t until) {
    std::fill(stale.begin(), stale.end(), 0);
    fallback_until = until;
    std::fill(actions.begin(), actions.end(), Action::AllreduceGrads);
    std::fill(lockstep.begin(), lockstep.end(), true);
  }

  std::vector<Action> actions;
  std::vector<bool> lockstep;
  std::vector<int64_t> stale;       // local updates since the layer's last sync, counting this step's
  std::vector<bool> delayed_now;    // layers whose average of this step is delayed (updated locally now)
  int64_t fallback_until = 0;       // every layer lock-step before this step (an anomaly fallback)
};

}  // namespace dd::sync
