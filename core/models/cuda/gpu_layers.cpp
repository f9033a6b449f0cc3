// Device views of the CPU layers: same dimensions, pointers at the same offsets in the device arenas.
#include <string>

#include "core/common/error.h"
#include "core/models/cuda/gpu_arch.h"
#include "core/nn/layers.h"

namespace dd::models::gpu {

template <class L>
static const L& as(const nn::Layer* l) {
  auto* p = dynamic_cast<const L*>(l);
  DD_CHECK(p, "GPU model: layer '" + l->name + "' has kind '" + l->kind() + "', not the one the GPU code expects");
  return *p;
}

DevLinear::DevLinear(const nn::Layer* cpu, const DeviceArenas& a) {
  const auto& l = as<nn::Linear>(cpu);
  index = l.index();
  in = l.in;
  out = l.out;
  W = a.params + l.param_offset();
  dW = a.grads + l.param_offset();
  b = l.has_bias ? W + in * out : nullptr;
  db = l.has_bias ? dW + in * out : nullptr;
}

DevLayerNorm::DevLayerNorm(const nn::Layer* cpu, const DeviceArenas& a) {
  const auto& l = as<nn::LayerNorm>(cpu);
  index = l.index();
  C = l.C;
  w = a.params + l.param_offset();
  dw = a.grads + l.param_offset();
  b = w + C;
  db = dw + C;
}

DevEmbedding::DevEmbedding(const nn::Layer* cpu, const DeviceArenas& a) {
  const auto& l = as<nn::Embedding>(cpu);
  index = l.index();
  V = l.V;
  C = l.C;
  W = a.params + l.param_offset();
  dW = a.grads + l.param_offset();
}

DevConv::DevConv(const nn::Layer* cpu, const DeviceArenas& a) {
  const auto& l = as<nn::Conv>(cpu);
  index = l.index();
  C = l.C;
  OC = l.OC;
  w = a.params + l.param_offset();
  dw = a.grads + l.param_offset();
  op = std::make_unique<cuops::Conv2d>(l.C, l.OC, l.k, l.stride, l.pad);
}

DevBatchNorm::DevBatchNorm(const nn::Layer* cpu, const DeviceArenas& a) {
  const auto& l = as<nn::BatchNorm>(cpu);
  index = l.index();
  C = l.C;
  gamma = a.params + l.param_offset();
  beta = gamma + C;
  dgamma = a.grads + l.param_offset();
  dbeta = dgamma + C;
  running_mean = a.buffers + l.buffer_offset();
  running_var = running_mean + C;
}

}  // namespace dd::models::gpu
