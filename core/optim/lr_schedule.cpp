// LrSchedule::at: the learning rate of a step.
#include "core/optim/lr_schedule.h"

#include <cmath>

#include "base/error.h"

namespace dd::optim {

float LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup) return base_lr * float(step + 1) / float(warmup);
  if (kind == ScheduleKind::Const) return base_lr;
  if (kind == ScheduleKind::Step) return base_lr * std::pow(gamma, float(step / std::max<int64_t>(1, step_every)));
  const double span = double(std::max<int64_t>(1, total - warmup));
  const double progress = std::min(1.0, double(step - warmup) / span);
  return float(min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress)));
}

void LrSchedule::validate() const {
  if (!(base_lr > 0) || !std::isfinite(base_lr)) throw UsageError("--lr must be a positive number");
  if (warmup < 0) throw UsageError("--warmup must be >= 0");
  if (step_every < 1) throw UsageError("--lr-step-every must be >= 1");
}

}  // namespace dd::optim
