// The DreamDDP schedule solver: assigns each layer a phase in [0, H) minimizing the modelled time B + sum_i w_i / H,
// with a certified lower bound so every result states how far from optimal it can be.
#pragma once
#include <vector>

namespace dd::sync {

// The largest H (steps between a layer's syncs) that the solver, `dreamddp schedule` and the periodic policies accept.
constexpr int kMaxPhases = 4096;

// The work budgets make results independent of machine speed; time_budget_s is a safety net on slow machines.
struct SolveOptions {
  long long work_budget = 200'000'000;  // local search, in layers visited (~0.1 s)
  long long node_budget = 4'000'000;    // branch and bound nodes (~0.2 s)
  double time_budget_s = 0.9;           // wall-clock cap of the whole solve; a schedule is always returned
  bool branch_and_bound_only = false;     // tests: skip heuristic and bound shortcut, search from all-in-phase-0
};

struct ScheduleSolution {
  std::vector<int> phase;  // per layer (forward order), in [0, H)
  double time = 0;         // modelled seconds per iteration of `phase`
  double lower_bound = 0;  // no assignment has a smaller modelled time (== time when optimal)
  double gap = 0;          // (time - lower_bound) / time, >= 0
  bool optimal = false;    // proven: the bound meets the result, or branch and bound finished
  double solve_s = 0;      // wall time of the solve
  long long nodes = 0;     // branch-and-bound nodes visited (0 when the bound already certified the heuristic)
};

// Greedy list scheduling (each layer, in launch order, to the channel that frees up first), then local search
// (moves and swaps), then the flow lower bound; if the two do not meet, branch and bound over launch order
// (states = per-phase channel end times, symmetric idle channels merged) within the budget.
// Throws std::invalid_argument for H < 1, size mismatch or negative/non-finite times.
ScheduleSolution solve_schedule(const std::vector<double>& b, const std::vector<double>& c, int H,
                                const SolveOptions& options = {});

// Renumbers phases so that they are ordered by their first layer in forward order (same modelled time: the model
// does not see labels). solve_schedule returns its result in this canonical numbering.
std::vector<int> forward_phase_order(const std::vector<int>& phase, int H);

// Among schedules the model cannot tell apart, plsgd's contiguous split (contiguous_groups): where layer-wise
// scheduling has nothing to add under the model, dreamddp runs plsgd's schedule rather than an arbitrary optimum.
std::vector<int> prefer_plsgd_on_tie(const std::vector<double>& b, const std::vector<double>& c, int H,
                                     const std::vector<int>& phase);

// dreamddp:h=H,delay=T: from the better of the in-step optimum and plsgd's split under the delayed channel model
// (delayed_time, forward and update not counted; plsgd's on a tie), a local search of single-layer moves and swaps under that
// model, within a work budget. Never scores worse than either start. Deterministic like schedule_phases.
std::vector<int> schedule_phases_delayed(const std::vector<double>& b, const std::vector<double>& c, int H, int T);

// What the sync engine calls after self-profiling: the phase of every layer (prefer_plsgd_on_tie applied). Deterministic (no wall-clock cap), so
// ranks given the same b and c agree; ranks must therefore share one profile (e.g. rank 0's, broadcast).
std::vector<int> schedule_phases(const std::vector<double>& b, const std::vector<double>& c, int H);

}  // namespace dd::sync
