// Measures the per-layer inputs of the schedule solver on this setup: backward time of every layer (from the
// backward hook's ready times) and all-reduce time of every layer's parameters on this backend and network; with
// an optimizer, also the forward and the update of a step (what a simulation adds around the backward).
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
  int threads = 1;     // each rank's compute threads (whether the ranks on a machine outnumber its cores)
};

// `batch` supplies the model input of step i. With a backend, every rank must call this (collective); all ranks
// return the same rank-averaged profile. Without one, comm times are 0. With `update` (the caller's update of one
// layer, which must leave its gradient zeroed), every pass also updates every layer, last first, and the profile
// holds forward_s and update_s; without one gradients are zeroed and those two stay unmeasured.
//
// Where the ranks on one machine run more threads than it has cores (core_share.h), the passes are timed one rank
// at a time, the others waiting, and the profile says so (LayerProfile::shared): a simulation shares the cores.
// Each time is a median over the passes, and so is each layer's backward. Where ranks outnumber cores, the
// scheduler takes a rank off its core for a slice somewhere in nearly every pass, but rarely inside one short
// layer: the sum of per-layer medians then misses that share. The times are therefore scaled together so that
// they add up to the median of whole passes (a factor near 1 on an idle machine). Ranks that share cores do not
// run alike (one rank's passes can take a sixth longer than another's, in either order from one start to the
// next), and every sync waits for the slowest: the agreed times (the ranks' average per part) are scaled once more,
// so that a whole pass takes what the slowest rank's median pass took.
LayerProfile measure_profile(models::Model& m, const std::function<models::Input(int)>& batch, Backend* b,
                             const ProfileOptions& o, const std::function<void(int layer)>& update = {});

// The factor that makes the parts' medians add up to the median of whole passes: median(totals) / sum(parts), or
// 1 when either is not positive.
double pass_scale(const std::vector<double>& part_medians, std::vector<double> pass_totals);

// The factor that paces agreed parts to the slowest rank: max(rank_passes) / sum(parts), or 1 when either is not
// positive.
double slowest_scale(const std::vector<double>& parts, const std::vector<double>& rank_passes);

}  // namespace dd::sync
