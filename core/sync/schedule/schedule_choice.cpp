// choose_in_step: the layer-wise schedule or Local SGD's, under the time model with the overlap charge.
#include "core/sync/schedule/schedule_choice.h"

#include <algorithm>
#include <numeric>

namespace dd::sync {

double fitted_alpha(const std::vector<double>& c, const std::vector<int64_t>& bytes) {
  return bytes.size() == c.size() ? fit_comm(bytes, c).alpha_s : 0;
}

std::vector<double> fused_comm(const std::vector<double>& c, const std::vector<int64_t>& bytes,
                               const std::vector<int>& phase, double alpha) {
  std::vector<double> f = c;
  int64_t bucket = 0;
  for (int l = int(c.size()) - 1; l >= 0; --l) {
    const bool joins = l + 1 < int(c.size()) && phase[size_t(l)] == phase[size_t(l + 1)] && bucket < kFusedCap;
    if (joins) f[size_t(l)] = std::max(0.0, c[size_t(l)] - alpha);
    bucket = (joins ? bucket : 0) + bytes[size_t(l)];
  }
  return f;
}

InStepChoice choose_in_step(const std::vector<double>& b, const std::vector<double>& c, int H,
                            const std::vector<int>& solved, bool fillin, const Contention& k,
                            const std::vector<int64_t>& bytes) {
  InStepChoice best;
  best.localsgd_s = localsgd_time(b, c, H);
  const FillIn none(b.size());
  auto consider = [&](const std::vector<int>& phase, const FillIn& fill) {
    const double t = modelled_time(b, c, H, phase, &fill, k);
    if (best.phase.empty() || t < best.layerwise_s) best.phase = phase, best.fill = fill, best.layerwise_s = t;
  };
  if (fillin) consider(solved, fill_in(b, c, H, solved));
  consider(solved, none);
  if (!k.none()) {
    const auto plsgd = contiguous_groups(c, H);
    if (fillin) consider(plsgd, fill_in(b, c, H, plsgd));
    consider(plsgd, none);
  }
  if (bytes.size() == c.size() && (best.alpha_s = fitted_alpha(c, bytes)) > 0) {
    const auto plsgd = contiguous_groups(c, H);
    auto fused = [&](const std::vector<int>& phase, const FillIn& fill) {
      return modelled_time(b, fused_comm(c, bytes, phase, best.alpha_s), H, phase, &fill, k);
    };
    best.fused_solved_s = fused(best.phase, best.fill);
    const FillIn plsgd_fill = fillin ? fill_in(b, c, H, plsgd) : none;
    best.fused_plsgd_s = fused(plsgd, plsgd_fill);
    // A tie, or plsgd's split modelled faster: the model cannot tell the solver's phases as better, and the split
    // is the default the run started from (interleaved phases also cost latencies a fitted line misses).
    if (plsgd != best.phase && best.fused_plsgd_s <= best.fused_solved_s) {
      best.phase = plsgd, best.fill = plsgd_fill, best.layerwise_s = best.fused_plsgd_s;
      best.fused_plsgd = true;
      std::vector<int> one(c.size(), 0);  // Local SGD's average: every layer in one run of buckets
      best.localsgd_s = localsgd_time(b, fused_comm(c, bytes, one, best.alpha_s), H);
    }
  }
  // Equal up to rounding of the sums is a tie, and a tie keeps the layer-wise schedule.
  const double tol = 1e-12 * (total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0));
  best.local_sgd = best.localsgd_s + tol < best.layerwise_s;
  return best;
}

}  // namespace dd::sync
