// The DreamDDP time model (docs/design.md "The schedule solver"): scores a per-layer phase assignment, plus
// the baselines ddp, localsgd and plsgd, and the fill-in of extra syncs into idle bandwidth.
#pragma once
#include <vector>

#include "core/sync/types/contention.h"

namespace dd::sync {

// Per-layer extra phases (fill-in syncs) on top of the primary phase; empty inner vectors mean none.
using FillIn = std::vector<std::vector<int>>;

// B = sum of backward times.
double total_backward(const std::vector<double>& b);

// Gradient-ready time of every layer (forward index l): R_l = sum_{j >= l} b_j, backward running L-1 .. 0.
std::vector<double> ready_times(const std::vector<double>& b);

// Wait w_i of each of the H phases: one FIFO channel, layers launched in backward order, w_i = max(0, end - B).
// fillin (optional) adds extra syncs of layers at other phases. Throws std::invalid_argument on bad sizes/phases.
std::vector<double> phase_waits(const std::vector<double>& b, const std::vector<double>& c, int H,
                                const std::vector<int>& phase, const FillIn* fillin = nullptr);

// Modelled seconds per iteration: B + (sum_i w_i) / H. With contention (the profile's, contention.h), where
// overlapped communication and compute slow each other: every phase's iteration is max(B'_i, end_i), with the
// backward B'_i = B + compute/(1 + compute) x (seconds its channel is busy during it) and every transfer running
// 1 + comm times longer while it overlaps that backward (ready times stretched with it; a fixed point of 4
// rounds). No contention (the default, and where cores are not shared) is the paper's model, computed as before.
double modelled_time(const std::vector<double>& b, const std::vector<double>& c, int H,
                     const std::vector<int>& phase, const FillIn* fillin = nullptr, const Contention& k = {});

// Baselines as the profile README states them: ddp B + C (no overlap credited), localsgd B + C / H.
double ddp_time(const std::vector<double>& b, const std::vector<double>& c);
double localsgd_time(const std::vector<double>& b, const std::vector<double>& c, int H);

// plsgd's grouping: H contiguous groups (forward order) of ~equal weight (bytes, or comm time as their proxy);
// group j gets phase j. Each cut goes where the running weight is closest to its target j*W/H, keeping every
// group non-empty while there are at least H layers.
std::vector<int> contiguous_groups(const std::vector<double>& weight, int H);

// plsgd's modelled time: contiguous_groups(c, H) scored with modelled_time.
double plsgd_time(const std::vector<double>& b, const std::vector<double>& c, int H);

// delay=T (docs/design.md "Delayed merge, outer optimizer, compression"): seconds per iteration, forward + backward + update + waits,
// when iteration i's averages (phase i mod H, launched in its backward) must have ended by the start of
// iteration i + T, on one FIFO channel that runs across iterations, through forward and update too. `fwd` and
// `upd` are the forward and update seconds per iteration. T = 0 waits before the update of the same iteration:
// then this is modelled_time(b, c, H, phase) + fwd + upd. Steady state: the mean of the last 4H of 4H(T + 4)
// simulated iterations. Throws std::invalid_argument on bad input.
double delayed_time(const std::vector<double>& b, const std::vector<double>& c, int H, const std::vector<int>& phase,
                    int T, double fwd, double upd);

// localsgd:k=K,delay=T: seconds per iteration when the whole model's average is launched after the update of every
// K-th iteration and must have ended by the start of iteration i + T (merged there), on the same channel model as
// delayed_time (one FIFO across iterations; the whole model is one transfer of sum(c)). T = 0 is blocking Local SGD:
// fwd + upd + localsgd_time(b, c, K). Steady state as delayed_time. Throws std::invalid_argument on bad input.
double localsgd_delayed_time(const std::vector<double>& b, const std::vector<double>& c, int K, int T, double fwd,
                             double upd);

// Fill-in: for each phase that already has a layer, adds syncs of layers that are not already synced there and sit
// next to one that is (so they join one of the phase's buckets and open no collective of their own), smallest comm
// first, whenever that leaves the phase's wait unchanged (the channel was idle), so modelled time never increases.
// The check launches the phase as the engine does, adjacent layers fused into one bucket that starts when its last
// layer in backward is ready: a fill-in layer next to a scheduled one delays it. (Adjacent layers fuse under the
// engine's default bucket caps unless a bucket has already reached 25 MiB.)
FillIn fill_in(const std::vector<double>& b, const std::vector<double>& c, int H, const std::vector<int>& phase);

}  // namespace dd::sync
