// Fusing adjacent layers with the same action into buckets (contiguous arena ranges, no copies), in backward
// order, with PyTorch DDP's caps and rule (first bucket 1 MiB, then 25 MiB; a bucket closes once it reaches its cap).
#pragma once
#include <cstdint>
#include <vector>

#include "core/sync/types/action.h"

namespace dd::sync {

// Parameter averages carry the layer's buffers (BatchNorm running stats) along.
inline bool averages_params(Action a) { return a == Action::AverageParams || a == Action::AverageGroup; }

struct Bucket {
  int lo = 0, hi = 0;          // forward layer indices [lo, hi]; launched when layer lo is ready
  Action action = Action::None;
  int64_t param_off = 0, param_n = 0;    // float range in the parameter (or gradient) arena
  int64_t buffer_off = 0, buffer_n = 0;  // float range in the buffer arena (BatchNorm running stats)
  int64_t bytes() const { return 4 * (param_n + (averages_params(action) ? buffer_n : 0)); }
};

struct LayerRange {
  int64_t param_off, param_n, buffer_off, buffer_n;
};

// Buckets in launch order (reverse layer order). Layers with Action::None break buckets.
std::vector<Bucket> plan_buckets(const std::vector<Action>& actions, const std::vector<LayerRange>& layers,
                                 int64_t first_cap_bytes, int64_t cap_bytes);

}  // namespace dd::sync
