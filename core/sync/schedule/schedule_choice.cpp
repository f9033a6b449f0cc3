// choose_in_step: the layer-wise schedule or Local SGD's, under the time model with the overlap charge.
#include "core/sync/schedule/schedule_choice.h"

#include <numeric>

namespace dd::sync {

InStepChoice choose_in_step(const std::vector<double>& b, const std::vector<double>& c, int H,
                            const std::vector<int>& solved, bool fillin, const Contention& k) {
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
  // Equal up to rounding of the sums is a tie, and a tie keeps the layer-wise schedule.
  const double tol = 1e-12 * (total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0));
  best.local_sgd = best.localsgd_s + tol < best.layerwise_s;
  return best;
}

}  // namespace dd::sync
