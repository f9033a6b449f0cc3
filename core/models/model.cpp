// Arena allocation and layer binding shared by all models, and the model registry.
#include "core/models/model.h"

#include "core/common/error.h"
#include "core/models/zoo.h"

namespace dd::models {

void Model::finalize(uint64_t seed) {
  int64_t np = 0, nb = 0;
  for (auto* l : layers_) {
    np += l->num_params();
    nb += l->num_buffers();
  }
  params_.resize(np);
  grads_.resize(np);
  buffers_.resize(nb);
  int64_t po = 0, bo = 0;
  Rng rng(seed);
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* l = layers_[i];
    l->bind(int(i), params_.data() + po, grads_.data() + po, po, nb ? buffers_.data() + bo : nullptr, bo);
    l->init(rng);
    po += l->num_params();
    bo += l->num_buffers();
  }
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "cnn", "resnet20", "gpt-mini"};
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed) {
  if (name == "mlp") return make_mlp(seed);
  if (name == "cnn") return make_cnn(seed);
  if (name == "resnet20") return make_resnet20(seed);
  if (name == "gpt-mini") return make_gpt_mini(seed);
  throw UsageError("unknown model '" + name + "' (expected mlp, cnn, resnet20 or gpt-mini)");
}

}  // namespace dd::models
