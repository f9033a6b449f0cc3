// Measures the per-layer inputs of the schedule solver on this setup: backward time of every layer (from the
// backward hook's ready times) and all-reduce time of every layer's parameters on this backend and network.
#pragma once
#include <functional>

#include "core/models/model.h"
#include "core/sync/profile/profile_io.h"

namespace dd {
class Backend;
}

namespace dd::sync {

struct ProfileOptions {
  int steps = 10;      // timed forward+backward passes (after one warm-up)
  int comm_reps = 5;   // all-reduces per layer; the median counts
};

// `batch` supplies the model input of step i. With a backend, every rank must call this (collective); all ranks
// return the same rank-averaged profile. Without one, comm times are 0.
LayerProfile measure_profile(models::Model& m, const std::function<models::Input(int)>& batch, Backend* b,
                             const ProfileOptions& o);

}  // namespace dd::sync
