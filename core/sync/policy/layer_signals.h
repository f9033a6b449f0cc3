// LayerSignals: the local per-layer statistics a voting policy casts its votes from (control/grad_signals.h).
#pragma once
#include <cstdint>
#include <vector>

namespace dd::sync {

// Local, per-layer statistics of this rank's step (computed only for policies that ask for them), taken from the
// local gradient when the layer's backward finishes, before any all-reduce.
struct LayerSignals {
  std::vector<double> grad_norm;   // ||g_l||
  std::vector<double> cos_prev;    // cos(g_l(t), g_l(t-1)) of this rank's local gradients (1 at the first step)
  std::vector<int64_t> stale;      // local updates since the layer's last sync
};

}  // namespace dd::sync
