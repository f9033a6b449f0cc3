// SGD and AdamW updates with PyTorch's semantics, applied to one layer's slice of the arenas on their device.
#include "core/optim/optimizer.h"

#include "base/error.h"

namespace dd::optim {

const char* name(OptimizerKind k) { return k == OptimizerKind::AdamW ? "adamw" : "sgd"; }

Optimizer::Optimizer(const OptimConfig& cfg, const ParamTable& table) : cfg_(cfg), table_(table) {
  state_ = ops::DeviceFloats(table.device(), size_t(table.num_params()) * state_slots());
  steps_.assign(table.num_layers(), 0);
}

void Optimizer::update_layer(int layer, float lr) {
  const LayerSlice l = table_.layer_slice(layer);
  const int64_t n = l.count, off = l.offset;
  float* p = l.params;
  float* g = l.grads;
  const float wd = cfg_.weight_decay;
  const int64_t step = ++steps_[layer];
  // One fused pass each (core/ops/optim_step.cpp, core/ops/cuda/optimizer.cu): the update and the zeroing of g.
  ops::Device& dev = table_.device();
  if (cfg_.kind == OptimizerKind::Sgd) {
    dev.sgd_update(p, g, state_.data() + off, n, lr, cfg_.momentum, wd, cfg_.nesterov);
  } else {
    float* m = state_.data() + off;
    float* v = state_.data() + table_.num_params() + off;
    dev.adamw_update(p, g, m, v, n, lr, cfg_.beta1, cfg_.beta2, cfg_.eps, wd, step);
  }
}

void Optimizer::copy_state_to(Optimizer& dst) const {
  DD_CHECK(dst.cfg_.kind == cfg_.kind && dst.state_.size() == state_.size() && dst.steps_.size() == steps_.size(),
           "optimizer state: '" + std::string(name(cfg_.kind)) + "' and '" + name(dst.cfg_.kind) + "' states have different layouts");
  ops::copy_across(dst.state_.device(), dst.state_.data(), state_.device(), state_.data(),
                   sizeof(float) * state_.size());
  dst.steps_ = steps_;
}

}  // namespace dd::optim
