// DreamDDP schedule solver: greedy + local search, certified by a max-flow bound, closed by branch and bound.
#include "core/sync/schedule/schedule_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "base/clock.h"
#include "core/sync/schedule/schedule_bound.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

namespace {

// Everything the search needs about one instance. "late" = sum_i w_i, the quantity actually minimized.
struct Instance {
  std::vector<double> c, R;
  double B = 0;
  int L = 0, H = 1;
};

// late of phase p when layer `add` is added to it and layer `drop` removed from it (-1 = none).
double phase_late(const Instance& in, const std::vector<int>& ph, int p, int add, int drop) {
  double end = 0.0;
  for (int l = in.L - 1; l >= 0; --l) {
    bool member = (ph[l] == p && l != drop) || l == add;
    if (member) end = std::max(end, in.R[l]) + in.c[l];
  }
  return std::max(0.0, end - in.B);
}

std::vector<int> greedy(const Instance& in) {
  std::vector<double> end(in.H, 0.0);
  std::vector<int> ph(in.L, 0);
  for (int l = in.L - 1; l >= 0; --l) {
    int best = static_cast<int>(std::min_element(end.begin(), end.end()) - end.begin());
    ph[l] = best;
    end[best] = std::max(end[best], in.R[l]) + in.c[l];
  }
  return ph;
}

// First-improvement descent over single-layer moves and pairwise swaps. Work (layers visited) is capped so the
// result does not depend on machine speed; the deadline is only a safety net.
void local_search(const Instance& in, std::vector<int>& ph, double deadline, long long work_budget) {
  long long work = 0;
  auto out_of_budget = [&] { return work > work_budget || now_s() > deadline; };
  std::vector<double> late(in.H);
  for (int p = 0; p < in.H; ++p) late[p] = phase_late(in, ph, p, -1, -1);
  const double eps = 1e-13 * (in.B + std::accumulate(in.c.begin(), in.c.end(), 0.0));
  bool improved = true;
  while (improved && !out_of_budget()) {
    improved = false;
    for (int l = 0; l < in.L; ++l) {
      if (in.c[l] <= 0.0) continue;
      work += static_cast<long long>(in.L) * in.H;
      const int a = ph[l];
      const double a_without = phase_late(in, ph, a, -1, l);
      for (int p = 0; p < in.H; ++p) {
        if (p == a) continue;
        const double p_with = phase_late(in, ph, p, l, -1);
        if (a_without + p_with < late[a] + late[p] - eps) {
          ph[l] = p;
          late[a] = a_without;
          late[p] = p_with;
          improved = true;
          break;
        }
      }
    }
    if (improved) continue;
    for (int x = 0; x < in.L && !out_of_budget(); ++x) {
      if (in.c[x] <= 0.0) continue;
      work += 2LL * in.L * (in.L - x);
      for (int y = x + 1; y < in.L; ++y) {
        const int a = ph[x], p = ph[y];
        if (a == p || in.c[y] <= 0.0) continue;
        std::swap(ph[x], ph[y]);
        const double la = phase_late(in, ph, a, -1, -1), lp = phase_late(in, ph, p, -1, -1);
        if (la + lp < late[a] + late[p] - eps) {
          late[a] = la;
          late[p] = lp;
          improved = true;
        } else {
          std::swap(ph[x], ph[y]);
        }
      }
    }
  }
}

// Depth-first branch and bound in launch order (layer L-1 first). The state is each channel's end time; channels
// already idle at the current layer's ready time are interchangeable for the rest of the search (every later layer
// is ready even later), so only one of them is tried.
class BranchAndBound {
 public:
  // target_late: a proven lower bound on the optimum; reaching it ends the search early.
  BranchAndBound(const Instance& in, std::vector<int> incumbent, double incumbent_late, double target_late,
                 double deadline, long long node_budget)
      : in_(in), best_(std::move(incumbent)), best_late_(incumbent_late), target_late_(target_late),
        deadline_(deadline),
        node_budget_(node_budget), ph_(in.L, 0), end_(in.H, 0.0),
        cand_(static_cast<size_t>(in.L) * in.H) {
    rem_c_.assign(in.L + 1, 0.0);
    rem_early_.assign(in.L + 1, 0.0);
    for (int l = 0; l < in.L; ++l) {
      rem_c_[l + 1] = rem_c_[l] + in.c[l];
      rem_early_[l + 1] = rem_early_[l] + std::min(in.c[l], in.B - in.R[l]);
    }
    eps_ = 1e-12 * (in.B + rem_c_[in.L]);
  }

  // True when the search finished (best is optimal); false when a budget ran out.
  bool run() {
    if (best_late_ > target_late_ + eps_) search(in_.L - 1, 0.0);
    return !stopped_;
  }
  const std::vector<int>& best() const { return best_; }
  long long nodes() const { return nodes_; }

 private:
  void search(int k, double late) {
    if (stopped_ || done_) return;
    if (++nodes_ % 4096 == 0 && (now_s() > deadline_ || nodes_ > node_budget_)) stopped_ = true;
    if (k < 0) {
      if (late < best_late_ - eps_) {
        best_late_ = late;
        best_ = ph_;
        if (best_late_ <= target_late_ + eps_) done_ = true;
      }
      return;
    }
    // Layers 0..k are still to place; all become ready at R_k or later, and each can finish at most
    // min(c, B - R) of its communication before B.
    const double Rk = in_.R[k];
    double cap = 0.0;
    for (double e : end_) cap += std::max(0.0, in_.B - std::max(e, Rk));
    const double bound = late + rem_c_[k + 1] - std::min(cap, rem_early_[k + 1]);
    if (bound >= best_late_ - eps_) return;

    // Candidate channels: one idle channel, plus each distinct busy end time; most promising (earliest) first.
    int* cand = cand_.data() + static_cast<size_t>(k) * in_.H;
    int n = 0;
    bool idle_taken = false;
    for (int i = 0; i < in_.H; ++i) {
      if (end_[i] <= Rk) {
        if (idle_taken) continue;
        idle_taken = true;
      } else {
        bool dup = false;
        for (int j = 0; j < n; ++j) dup |= end_[cand[j]] == end_[i];
        if (dup) continue;
      }
      cand[n++] = i;
    }
    std::sort(cand, cand + n, [&](int x, int y) { return end_[x] < end_[y]; });
    if (in_.c[k] <= 0.0) n = std::min(n, 1);  // a free layer changes nothing for later layers
    for (int j = 0; j < n; ++j) {
      const int i = cand[j];
      const double old_end = end_[i];
      const double new_end = std::max(old_end, Rk) + in_.c[k];
      end_[i] = new_end;
      ph_[k] = i;
      search(k - 1, late + std::max(0.0, new_end - in_.B) - std::max(0.0, old_end - in_.B));
      end_[i] = old_end;
      if (stopped_ || done_) return;
    }
  }

  const Instance& in_;
  std::vector<int> best_;
  double best_late_;
  double target_late_;
  double deadline_;
  long long node_budget_;
  std::vector<int> ph_;
  std::vector<double> end_;
  std::vector<int> cand_;  // per-depth candidate channel lists
  std::vector<double> rem_c_, rem_early_;
  double eps_ = 0;
  long long nodes_ = 0;
  bool stopped_ = false;  // a budget ran out
  bool done_ = false;     // the incumbent met the lower bound
};

void validate(const std::vector<double>& b, const std::vector<double>& c, int H) {
  if (H < 1) throw std::invalid_argument("schedule solver: H must be >= 1, got " + std::to_string(H));
  if (b.size() != c.size())
    throw std::invalid_argument("schedule solver: " + std::to_string(b.size()) + " backward times but " +
                                std::to_string(c.size()) + " comm times");
  for (size_t l = 0; l < b.size(); ++l)
    if (!(std::isfinite(b[l]) && std::isfinite(c[l]) && b[l] >= 0 && c[l] >= 0))
      throw std::invalid_argument("schedule solver: layer " + std::to_string(l) +
                                  " has a negative or non-finite time");
}

}  // namespace

// The time model is blind to phase labels (any permutation of phases scores the same), but training is not:
// averaging a window's layers in forward order (input layers first) converged measurably better than the
// reverse order at the same cost (experiments/results/convergence.md). Phases are therefore numbered by their
// first layer in forward order; empty phases (H > layers) come last.
std::vector<int> forward_phase_order(const std::vector<int>& phase, int H) {
  std::vector<int> first(H, std::numeric_limits<int>::max());
  for (int l = 0; l < int(phase.size()); ++l) first[phase[l]] = std::min(first[phase[l]], l);
  std::vector<int> order(H);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return first[a] < first[b]; });
  std::vector<int> label(H);
  for (int i = 0; i < H; ++i) label[order[i]] = i;
  std::vector<int> out(phase.size());
  for (size_t l = 0; l < phase.size(); ++l) out[l] = label[phase[l]];
  return out;
}

ScheduleSolution solve_schedule(const std::vector<double>& b, const std::vector<double>& c, int H,
                                const SolveOptions& options) {
  validate(b, c, H);
  const double t0 = now_s();
  const double deadline = t0 + options.time_budget_s;
  Instance in;
  in.c = c;
  in.R = ready_times(b);
  in.B = total_backward(b);
  in.L = static_cast<int>(b.size());
  in.H = H;

  ScheduleSolution s;
  const double bound = schedule_lower_bound(b, c, H);
  if (options.branch_and_bound_only) {
    s.phase.assign(in.L, 0);
  } else {
    s.phase = greedy(in);
    local_search(in, s.phase, deadline, options.work_budget);
  }
  s.time = modelled_time(b, c, H, s.phase);
  // Rounding can put the bound a hair above an optimal result; never report a negative gap.
  s.lower_bound = std::min(s.time, bound);
  const double tol = 1e-12 * std::max(s.time, 1e-300);
  if (s.time - s.lower_bound <= tol && !options.branch_and_bound_only) {
    s.optimal = true;
  } else {
    const double late = (s.time - in.B) * H;
    const double target = options.branch_and_bound_only ? -1.0 : (bound - in.B) * H;
    BranchAndBound bnb(in, s.phase, late, target, deadline, options.node_budget);
    const bool finished = bnb.run();
    s.nodes = bnb.nodes();
    const double t = modelled_time(b, c, H, bnb.best());
    if (t < s.time) {
      s.time = t;
      s.phase = bnb.best();
    }
    s.lower_bound = std::min(s.time, finished ? s.time : bound);
    s.optimal = finished || s.time - s.lower_bound <= tol;
  }
  s.gap = s.time > 0 ? (s.time - s.lower_bound) / s.time : 0.0;
  s.phase = forward_phase_order(s.phase, H);
  s.solve_s = now_s() - t0;
  return s;
}

std::vector<int> prefer_plsgd_on_tie(const std::vector<double>& b, const std::vector<double>& c, int H,
                                     const std::vector<int>& phase) {
  auto plsgd = contiguous_groups(c, H);
  // Equal under the model up to rounding of the sums (the model adds the same numbers in another order).
  const double tol = 1e-12 * (total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0));
  return modelled_time(b, c, H, plsgd) <= modelled_time(b, c, H, phase) + tol ? plsgd : phase;
}

std::vector<int> schedule_phases(const std::vector<double>& b, const std::vector<double>& c, int H) {
  // Every rank computes this from the same profile and must get the same answer: work budgets only, no clock.
  SolveOptions deterministic;
  deterministic.time_budget_s = std::numeric_limits<double>::infinity();
  return prefer_plsgd_on_tie(b, c, H, solve_schedule(b, c, H, deterministic).phase);
}

std::vector<int> schedule_phases_delayed(const std::vector<double>& b, const std::vector<double>& c, int H, int T) {
  auto best = schedule_phases(b, c, H);
  if (T == 0) return best;
  auto plsgd = contiguous_groups(c, H);
  const double tol = 1e-12 * (total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0));
  auto cost = [&](const std::vector<int>& ph) { return delayed_time(b, c, H, ph, T, 0, 0); };
  // The in-step optimum packs the big layers into consecutive phases (each hides behind its own backward); across
  // iterations they then queue on the one channel and the delay cannot absorb them. Local search under the delayed
  // model spreads them: moves of one layer to another phase and swaps of two layers' phases, first improvement,
  // from the better of the two starting points (plsgd's on a tie), passes until none improves. Work-bounded,
  // deterministic.
  auto phase = cost(plsgd) <= cost(best) + tol ? plsgd : best;
  double t = cost(phase);
  const int L = int(phase.size());
  long long budget = 50'000'000;  // layers visited by delayed_time (~0.1 s), as the solver's work budget
  bool improved = true;
  // Tries the change `flip` makes to `phase`; keeps it if it lowers the modelled time, else flips it back.
  auto try_change = [&](auto flip) {
    flip();
    const double tp = cost(phase);
    budget -= 4LL * H * (T + 4) * L;
    if (tp < t - tol) t = tp, improved = true;
    else flip();
  };
  while (improved && budget > 0) {
    improved = false;
    for (int l = 0; l < L && budget > 0; ++l)  // moves: one layer to another phase
      for (int p = 0; p < H && budget > 0; ++p) {
        const int q = phase[size_t(l)];
        if (p != q) try_change([&, q] { phase[size_t(l)] = phase[size_t(l)] == q ? p : q; });
      }
    for (int l = 0; l < L && budget > 0; ++l)  // swaps: two layers exchange their phases
      for (int m = l + 1; m < L && budget > 0; ++m)
        if (phase[size_t(l)] != phase[size_t(m)]) try_change([&] { std::swap(phase[size_t(l)], phase[size_t(m)]); });
  }
  return phase;  // not renumbered: under the delayed model the phases' cyclic order matters
}

}  // namespace dd::sync
