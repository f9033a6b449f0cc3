// GradSignals: the local per-layer statistics a policy (or compress=auto) reads — ||g_l|| and the cosine between
// this rank's successive local gradients — taken from each layer's gradient in the backward hook, before any
// all-reduce touches it, with the previous gradient kept per layer.
#pragma once
#include <cstdint>
#include <vector>

#include "core/common/bytes.h"
#include "core/sync/policy/layer_signals.h"
#include "core/sync/types/bucket_plan.h"
#include "core/ops/device.h"

namespace dd::sync {

class GradSignals {
 public:
  // On: previous gradients of `num_params` floats and signals of `layers` layers, reset (no previous gradient).
  // Off: nothing is taken (the previous state is kept, unused). `constant`: no gradient is read, every layer's
  // norm and cosine are 1 (a simulation, whose collectives and gradients carry no data).
  // `dev`: the gradients' device, where the previous gradients are kept.
  void configure(bool on, int layers, int64_t num_params, bool constant, ops::Device& dev);
  bool on() const { return on_; }
  // Layer l's signals from its gradient `g` (r.param_n floats); `stale` = its local updates since its last sync.
  // On the gradients' device (given to configure): only the three sums come back.
  void take(int l, const LayerRange& r, const float* g, int64_t stale);
  const LayerSignals& signals() const { return s_; }

  void save(ByteWriter& w) const;
  void load(ByteReader& r);

 private:
  bool on_ = false, constant_ = false;
  LayerSignals s_;
  ops::DeviceFloats prev_;  // on the gradients' device
  std::vector<bool> has_prev_;
};

}  // namespace dd::sync
