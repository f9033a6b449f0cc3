// LayerTimes: a profile as the policies see it, per-layer backward and communication times and their contention.
#pragma once
#include <vector>

#include "core/sync/types/contention.h"

namespace dd::sync {

// Measured per-layer backward and communication times (seconds), agreed across ranks.
struct LayerTimes {
  std::vector<double> backward_s;
  std::vector<double> comm_s;
  // What overlapped communication and compute cost each other here (self_profile.h measure_contention); none
  // where they do not share cores (the time model of the paper).
  Contention contention;
};

}  // namespace dd::sync
