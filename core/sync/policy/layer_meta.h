// What the policies may know of a model's layers (LayerMeta), built in one place for the engine and for the
// up-front checks of a single process (which has no engine but must refuse a spec that fits no layer).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/policy_spec.h"

namespace dd::nn {
class Layer;
}

namespace dd::sync {

// What a policy may know about the model (identical on all ranks).
struct LayerMeta {
  std::string name;
  std::string kind;
  int64_t params = 0;
  int64_t bytes = 0;  // parameters + buffers, float32
};

std::vector<LayerMeta> layer_metas(const std::vector<nn::Layer*>& layers);

// Builds the policy of `spec` and runs its setup on this model, so that model-dependent mistakes (a `fixed`
// pattern that names no layer, a profile of another model) are refused before any work. Throws UsageError.
void check_policy_fits_model(const PolicySpec& spec, const std::vector<nn::Layer*>& layers, int world);

}  // namespace dd::sync
