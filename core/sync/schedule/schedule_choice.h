// What dreamddp runs in-step (delay=0) once it has a profile: the layer-wise schedule the solver found, with or
// without fill-in, or Local SGD's blocking schedule, whichever the time model with the profile's contention
// (contention.h: what overlapped communication and compute cost each other on shared cores) scores lowest.
#pragma once
#include <vector>

#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

struct InStepChoice {
  std::vector<int> phase;   // the layer-wise schedule (the solver's, or plsgd's split when contention makes it cheaper)
  FillIn fill;              // the fill-in kept (one empty vector per layer: none)
  double layerwise_s = 0;   // its modelled seconds per iteration, the overlap charge included
  double localsgd_s = 0;    // Local SGD's: the whole model averaged after the update overlaps no compute
  bool local_sgd = false;   // Local SGD's schedule is modelled strictly faster: dreamddp runs it instead
};

// `solved`: the solver's phases (schedule_phases). With no contention this is exactly the paper's choice: `solved`
// with fill-in when `fillin` (fill-in never raises the model's time, and no layer-wise optimum is slower than
// Local SGD, which is the schedule with every layer in one phase, launched after backward). With contention the
// candidates solved and plsgd's split, each with and without fill-in, are scored with modelled_time(..., k), ties
// to the first in that order; Local SGD wins only if strictly faster. Deterministic: ranks with one profile agree.
InStepChoice choose_in_step(const std::vector<double>& b, const std::vector<double>& c, int H,
                            const std::vector<int>& solved, bool fillin, const Contention& k);

}  // namespace dd::sync
