// SGD and AdamW updates with PyTorch's semantics, applied to one layer's slice of the arenas.
#include "core/optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "core/common/error.h"

namespace dd::optim {

Optimizer::Optimizer(const OptimConfig& cfg, models::Model& model) : cfg_(cfg), model_(model) {
  if (cfg.kind != "sgd" && cfg.kind != "adamw")
    throw UsageError("unknown optimizer '" + cfg.kind + "' (expected sgd or adamw)");
  state_.resize(size_t(model.num_params()) * state_slots());
  steps_.assign(model.num_layers(), 0);
}

void Optimizer::update_layer(int layer, float lr) {
  const nn::Layer* l = model_.layers()[layer];
  const int64_t n = l->num_params(), off = l->param_offset();
  float* __restrict p = l->params();
  float* __restrict g = l->grads();
  const float wd = cfg_.weight_decay;
  ++steps_[layer];
  if (cfg_.kind == "sgd") {
    float* __restrict buf = state_.data() + off;
    const float mu = cfg_.momentum;
    if (mu == 0.0f) {
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    } else if (cfg_.nesterov) {
      for (int64_t i = 0; i < n; ++i) {
        float d = g[i] + wd * p[i];
        float b = mu * buf[i] + d;
        buf[i] = b;
        p[i] -= lr * (d + mu * b);
      }
    } else {
      // PyTorch initializes the buffer with the first gradient; mu*0 + d is the same thing.
      for (int64_t i = 0; i < n; ++i) {
        float b = mu * buf[i] + (g[i] + wd * p[i]);
        buf[i] = b;
        p[i] -= lr * b;
      }
    }
  } else {
    float* __restrict m = state_.data() + off;
    float* __restrict v = state_.data() + model_.num_params() + off;
    const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
    const double t = double(steps_[layer]);
    const float bc1 = float(1.0 - std::pow(double(b1), t)), bc2 = float(1.0 - std::pow(double(b2), t));
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2), decay = 1.0f - lr * wd;
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i];
      float mi = b1 * m[i] + (1.0f - b1) * gi;
      float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }
  std::memset(g, 0, sizeof(float) * size_t(n));
}

}  // namespace dd::optim
