// SGD and AdamW updates with PyTorch's semantics, applied to one layer's slice of the arenas.
#include "core/optim/optimizer.h"

#include <cmath>

#include "core/common/error.h"
#include "core/ops/ops.h"

namespace dd::optim {

Optimizer::Optimizer(const OptimConfig& cfg, const ParamTable& table) : cfg_(cfg), table_(table) {
  if (cfg.kind != "sgd" && cfg.kind != "adamw")
    throw UsageError("unknown optimizer '" + cfg.kind + "' (expected sgd or adamw)");
  is_sgd_ = cfg.kind == "sgd";
  state_.resize(size_t(table.num_params()) * state_slots());
  steps_.assign(table.num_layers(), 0);
}

void Optimizer::update_layer(int layer, float lr) {
  const LayerSlice l = table_.layer_slice(layer);
  const int64_t n = l.count, off = l.offset;
  float* p = l.params;
  float* g = l.grads;
  const float wd = cfg_.weight_decay;
  ++steps_[layer];
  // One fused pass each (core/ops/optim_step.cpp): the update and the zeroing of g, threaded for large layers.
  if (is_sgd_) {
    ops::sgd_step(p, g, state_.data() + off, n, lr, cfg_.momentum, wd, cfg_.nesterov);
  } else {
    float* m = state_.data() + off;
    float* v = state_.data() + table_.num_params() + off;
    const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
    const double t = double(steps_[layer]);
    const float bc1 = float(1.0 - std::pow(double(b1), t)), bc2 = float(1.0 - std::pow(double(b2), t));
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2), decay = 1.0f - lr * wd;
    ops::adamw_step(p, g, m, v, n, b1, b2, eps, step, inv_sqrt_bc2, decay);
  }
}

}  // namespace dd::optim
