// Learning-rate schedules: constant, cosine or step decay, each with linear warm-up.
#pragma once
#include <cstdint>

namespace dd::optim {

// The shape of the decay after warm-up (core/train spells it for the CLI and the run's files).
enum class ScheduleKind { Const, Cosine, Step };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  float base_lr = 0.05f;
  int64_t warmup = 0;           // linear ramp from base_lr/warmup to base_lr over the first `warmup` steps
  int64_t total = 1;            // steps of the run (cosine decays to min_lr at `total`)
  float min_lr = 0.0f;
  int64_t step_every = 1000;    // step: multiply by gamma every step_every steps
  float gamma = 0.1f;

  float at(int64_t step) const;
  void validate() const;        // throws dd::UsageError
};

}  // namespace dd::optim
