// layer_metas / check_policy_fits_model: see layer_meta.h.
#include "core/sync/policy/layer_meta.h"

#include "core/nn/layer.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {

std::vector<LayerMeta> layer_metas(const std::vector<nn::Layer*>& layers) {
  std::vector<LayerMeta> meta;
  meta.reserve(layers.size());
  for (auto* l : layers) meta.push_back({l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
  return meta;
}

void check_policy_fits_model(const PolicySpec& spec, const std::vector<nn::Layer*>& layers, int world) {
  make_policy(spec)->setup(layer_metas(layers), world);
}

}  // namespace dd::sync
