// What dreamddp runs in-step (delay=0) once it has a profile: the layer-wise schedule the solver found, with or
// without fill-in, or Local SGD's blocking schedule, whichever the time model with the profile's contention
// (contention.h: what overlapped communication and compute cost each other on shared cores) scores lowest.
#pragma once
#include <cstdint>
#include <vector>

#include "core/sync/profile/comm_fit.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

struct InStepChoice {
  std::vector<int> phase;   // the layer-wise schedule (the solver's, or plsgd's split when contention makes it cheaper)
  FillIn fill;              // the fill-in kept (one empty vector per layer: none)
  double layerwise_s = 0;   // its modelled seconds per iteration, the overlap charge included
  double localsgd_s = 0;    // Local SGD's: the whole model averaged after the update overlaps no compute
  bool local_sgd = false;   // Local SGD's schedule is modelled strictly faster: dreamddp runs it instead
  // Fused buckets (`bytes` given): the per-collective latency fitted from the profile, and whether plsgd's
  // contiguous split replaced the solver's phases because fused it is modelled faster.
  double alpha_s = 0;
  bool fused_plsgd = false;
  double fused_solved_s = 0, fused_plsgd_s = 0;  // both candidates' fused modelled seconds (0 without `bytes`)
};

// The time model charges every layer its own all-reduce, c_l = alpha + bytes_l x per_byte. The engine fuses
// adjacent layers of one action into buckets (up to kFusedCap bytes), and a bucket pays alpha once: a schedule of
// contiguous phases pays it far less often than one that interleaves them. fused_comm: c with alpha taken off every
// layer that joins the bucket of its neighbour in launch order (reverse layer order) under `phase`.
constexpr int64_t kFusedCap = 25 << 20;
std::vector<double> fused_comm(const std::vector<double>& c, const std::vector<int64_t>& bytes,
                               const std::vector<int>& phase, double alpha);
// alpha of the profile: fit_comm's latency (comm_fit.h, the fit the engine's self-profile uses), 0 when the sizes
// are missing.
double fitted_alpha(const std::vector<double>& c, const std::vector<int64_t>& bytes);

// `solved`: the solver's phases (schedule_phases). With no contention this is exactly the paper's choice: `solved`
// with fill-in when `fillin` (fill-in never raises the model's time, and no layer-wise optimum is slower than
// Local SGD, which is the schedule with every layer in one phase, launched after backward). With contention the
// candidates solved and plsgd's split, each with and without fill-in, are scored with modelled_time(..., k), ties
// to the first in that order; Local SGD wins only if strictly faster. With `bytes` (the layers' sizes), plsgd's split
// then replaces the choice when, both scored with fused buckets (fused_comm), it is modelled no slower (a tie keeps
// the contiguous split: the model cannot tell the solver's phases as better).
// Deterministic: ranks with one profile agree.
InStepChoice choose_in_step(const std::vector<double>& b, const std::vector<double>& c, int H,
                            const std::vector<int>& solved, bool fillin, const Contention& k,
                            const std::vector<int64_t>& bytes = {});

}  // namespace dd::sync
