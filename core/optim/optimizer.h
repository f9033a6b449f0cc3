// Per-layer optimizers (SGD with momentum/Nesterov/weight decay, AdamW). The sync engine updates each layer on
// its own, with its own learning rate (staleness scaling), so the update is a per-layer call. One optimizer for
// every device: the state lives on the table's device and the update is that device's kernel-table entry.
#pragma once
#include <string>
#include <vector>

#include "core/optim/param_table.h"
#include "core/ops/device.h"

namespace dd::optim {

// The update rule; name() spells it as the CLI, checkpoints and summary.json do.
enum class OptimizerKind { Sgd, AdamW };
const char* name(OptimizerKind k);  // "sgd" | "adamw"

struct OptimConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

class Optimizer {
 public:
  // `table` (a model) must outlive the optimizer; the state arena is sized here, from its parameter count.
  Optimizer(const OptimConfig& cfg, const ParamTable& table);
  // theta_l <- theta_l - lr * update(g_l); then zeroes layer l's gradient (so backward can accumulate).
  void update_layer(int layer, float lr);
  // State arena on the table's device, parameter layout: SGD momentum [P]; AdamW m [P] then v [P]. Averaged as
  // an option of the sync engine; saved in checkpoints.
  ops::DeviceFloats& state() { return state_; }
  int state_slots() const { return cfg_.kind == OptimizerKind::AdamW ? 2 : 1; }
  std::vector<int64_t>& layer_steps() { return steps_; }  // AdamW bias-correction counters, per layer
  const OptimConfig& config() const { return cfg_; }
  // State and step counters into `dst` (same configuration and layout, any device). Synchronizing.
  void copy_state_to(Optimizer& dst) const;

 private:
  OptimConfig cfg_;
  const ParamTable& table_;
  ops::DeviceFloats state_;
  std::vector<int64_t> steps_;
};

}  // namespace dd::optim
