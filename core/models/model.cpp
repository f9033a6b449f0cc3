// Arena allocation, host initialization and the move to the model's device, layer binding, cross-device copies,
// and the model registry (one list: every model runs on every device).
#include "core/models/model.h"

#include "base/error.h"
#include "core/models/model_spec.h"
#include "core/models/zoo.h"

namespace dd::models {

void Model::bind_all(ops::Device& d) {
  int64_t po = 0, bo = 0;
  const bool nb = buffers_.size() > 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* l = layers_[i];
    l->bind(int(i), d, params_.data() + po, grads_.data() + po, po, nb ? buffers_.data() + bo : nullptr, bo);
    po += l->num_params();
    bo += l->num_buffers();
  }
}

void Model::finalize(uint64_t seed) {
  int64_t np = 0, nb = 0;
  for (auto* l : layers_) {
    np += l->num_params();
    nb += l->num_buffers();
  }
  // Host arenas first: initialization draws one Rng sequence on the host, whatever the device.
  ops::Device& host = ops::host_device();
  params_ = Arena(host, size_t(np));
  grads_ = Arena(host, size_t(np));
  buffers_ = Arena(host, size_t(nb));
  bind_all(host);
  Rng rng(seed);
  for (auto* l : layers_) l->init(rng);
  if (&dev_ == &host) return;
  Arena p(dev_, size_t(np)), g(dev_, size_t(np)), b(dev_, size_t(nb));
  ops::copy_across(dev_, p.data(), host, params_.data(), sizeof(float) * size_t(np));
  ops::copy_across(dev_, b.data(), host, buffers_.data(), sizeof(float) * size_t(nb));
  params_ = std::move(p);
  grads_ = std::move(g);
  buffers_ = std::move(b);
  bind_all(dev_);
}

static void check_same_layout(const Model& a, const Model& b) {
  DD_CHECK(a.name() == b.name() && a.num_params() == b.num_params() && a.num_layers() == b.num_layers() &&
               a.num_buffers() == b.num_buffers(),
           "model '" + a.name() + "' on " + a.device().name() + " and model '" + b.name() + "' on " +
               b.device().name() + " have different layouts");
}

void Model::copy_params_to(Model& dst) const {
  check_same_layout(*this, dst);
  ops::copy_across(dst.dev_, dst.params_.data(), dev_, params_.data(), sizeof(float) * params_.size());
  ops::copy_across(dst.dev_, dst.buffers_.data(), dev_, buffers_.data(), sizeof(float) * buffers_.size());
}

void Model::copy_grads_to(Model& dst) const {
  check_same_layout(*this, dst);
  ops::copy_across(dst.dev_, dst.grads_.data(), dev_, grads_.data(), sizeof(float) * grads_.size());
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "cnn", "resnet20", "gpt-mini", "gpt2", "llama", "resnet18",
                                               "resnet50"};
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed, ops::Device& dev) {
  ModelSpec spec = ModelSpec::parse(name);
  const std::string& f = spec.family();
  std::unique_ptr<Model> m;
  if (f == "mlp") m = make_mlp(spec, seed, dev);
  else if (f == "cnn") m = make_cnn(seed, dev);
  else if (f == "resnet20") m = make_resnet20(seed, dev);
  else if (f == "gpt-mini") m = make_gpt_mini(seed, dev);
  else if (f == "gpt2") m = make_gpt2(spec, seed, dev);
  else if (f == "llama") m = make_llama(spec, seed, dev);
  else if (f == "resnet18" || f == "resnet50") m = make_resnet(spec, seed, dev);
  else
    throw UsageError("unknown model '" + f + "' (expected mlp, cnn, resnet20, gpt-mini, gpt2, llama, resnet18 or resnet50)");
  spec.finish();  // an option the model did not ask for is refused
  return m;
}

}  // namespace dd::models
