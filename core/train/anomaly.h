// Anomaly guard: a NaN or Inf in the loss or in a layer's gradient, or a loss spike (factor over its EMA),
// detected after backward and before the update. A layer whose gradient is not finite is not updated this step
// (lock-step layers see the same all-reduced gradient on every rank, so they all skip it alike); the flag then
// goes through the control all-reduce and every rank applies the configured action a step or two later.
// The deferred and the immediate update (--immediate-update) use it alike: admit_layer right before each
// layer's update, whatever order the updates come in, then finish_step.
#pragma once
#include <cstdint>
#include <string>

#include "core/models/model.h"

namespace dd::train {

class AnomalyGuard {
 public:
  AnomalyGuard(double spike_factor, int64_t warmup_steps) : spike_(spike_factor), warmup_(warmup_steps) {}
  // Whether layer l may be updated this step: true if its gradient is finite; otherwise zeroes the gradient
  // and remembers the layer for finish_step. Runs on the model's device; only the verdict crosses to the host.
  bool admit_layer(models::Model& m, int l);
  // After the step's updates: this rank's anomaly, "" if none — the lowest-index layer admit_layer refused,
  // else a non-finite loss, else a loss spike over the EMA. Only a step without an anomaly moves the EMA.
  // Starts the next step afresh.
  std::string finish_step(float loss);
  double loss_ema() const { return ema_; }

 private:
  double spike_;
  int64_t warmup_;
  double ema_ = 0;
  int64_t seen_ = 0;
  int bad_layer_ = -1;  // lowest-index non-finite layer of this step
  std::string bad_name_;
};

}  // namespace dd::train
