// Anomaly guard: a NaN or Inf in the loss or in a layer's gradient, or a loss spike (factor over its EMA),
// detected after backward and before the update. A layer whose gradient is not finite is not updated this step
// (lock-step layers see the same all-reduced gradient on every rank, so they all skip it alike); the flag then
// goes through the control all-reduce and every rank applies the configured action a step or two later.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/models/model.h"

namespace dd::train {

class AnomalyGuard {
 public:
  AnomalyGuard(double spike_factor, int64_t warmup_steps) : spike_(spike_factor), warmup_(warmup_steps) {}
  // Returns a description of this rank's anomaly ("" if none); marks skip[l] for non-finite layers and zeroes
  // their gradients. `scan_grads` false checks the loss only (a device run, whose gradients are not on the host;
  // immediate-update mode checks each layer with layer_finite as its update comes up).
  std::string check(int64_t step, float loss, models::Model& m, std::vector<bool>& skip, bool scan_grads);
  // True if layer l's gradient is finite; otherwise zeroes it and, if `what` is empty, says which layer.
  static bool layer_finite(models::Model& m, int l, std::string& what);
  double loss_ema() const { return ema_; }

 private:
  double spike_;
  int64_t warmup_;
  double ema_ = 0;
  int64_t seen_ = 0;
};

}  // namespace dd::train
