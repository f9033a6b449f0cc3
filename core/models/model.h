// A model: an ordered list of parameter-owning layers over flat arenas, with forward and backward written out
// per architecture (llm.c style) once, over the kernel table of the device it is built for (core/ops/device.h):
// the same source runs on the host and on a GPU. backward() calls the hook after each layer, in strictly
// decreasing order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/optim/param_table.h"
#include "core/ops/device.h"

namespace dd::models {

// Storage of the arenas and activations: on the model's device (host memory for a host model).
using Arena = ops::DeviceFloats;

// One batch as the model sees it: images x[n, sample] or tokens[n, T]; targets y[n] or y[n, T]; pointers in the
// model's device memory.
struct Input {
  int64_t n = 0;
  const float* x = nullptr;
  const int32_t* tokens = nullptr;
  const int32_t* y = nullptr;
};

struct ForwardResult {
  float loss = 0;          // mean over predictions
  int64_t correct = 0;     // argmax == target
  int64_t predictions = 0; // n (classification) or n*T (language model)
};

// A model is the optimizer's parameter table (optim::ParamTable): the optimizer sees layer slices, never the model.
class Model : public optim::ParamTable {
 public:
  explicit Model(ops::Device& dev) : dev_(dev) {}
  virtual ~Model() = default;
  const std::string& name() const { return name_; }
  const std::vector<nn::Layer*>& layers() const { return layers_; }
  int num_layers() const override { return int(layers_.size()); }

  // Flat arenas: parameters and their gradients (same layout), buffers (BatchNorm running stats); in the memory
  // of device() (data() is a device pointer on a GPU model).
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  Arena& buffers() { return buffers_; }
  int64_t num_params() const override { return int64_t(params_.size()); }
  int64_t num_buffers() const { return int64_t(buffers_.size()); }
  ops::Device& device() const override { return dev_; }

  // Copies into `dst` (same architecture, any device): parameters and buffers, or the gradients. Synchronizing.
  void copy_params_to(Model& dst) const;
  void copy_grads_to(Model& dst) const;
  optim::LayerSlice layer_slice(int layer) const override {
    const nn::Layer* l = layers_[size_t(layer)];
    return {l->params(), l->grads(), l->param_offset(), l->num_params()};
  }

  virtual std::vector<int64_t> input_shape() const = 0;  // per sample: {1,28,28} or {T}
  virtual bool takes_tokens() const { return false; }
  virtual int num_classes() const = 0;
  virtual int64_t targets_per_sample() const { return 1; }
  // Token models: the vocabulary (token ids and targets lie in [0, vocab)); 0 for image models.
  virtual int64_t vocab() const { return takes_tokens() ? num_classes() : 0; }

  // Forward with loss. train=true uses batch statistics and keeps what backward needs.
  virtual ForwardResult forward(const Input& in, bool train) = 0;
  // Backward of the last training forward. Gradients are ACCUMULATED into grads(), which must be zero on entry
  // (the optimizer zeroes each layer's gradient after using it). `scale` multiplies the loss gradient.
  virtual void backward(nn::BackwardHook* hook, float scale = 1.0f) = 0;

 protected:
  // Registers a layer (forward order = index order) and returns it.
  template <class L>
  L* add(const std::string& name, std::unique_ptr<L> layer) {
    layer->name = name;
    L* raw = layer.get();
    layers_.push_back(raw);
    owned_.push_back(std::move(layer));
    return raw;
  }
  // Allocates the arenas, binds every layer's views, initializes parameters from seed on the host (the same Rng
  // sequence on every device) and moves them to the model's device.
  void finalize(uint64_t seed);
  // Scratch (activations, indices) on the model's device, grown only.
  template <class T = float>
  ops::DeviceArray<T> scratch() const { return ops::DeviceArray<T>(dev_); }
  static void notify(nn::BackwardHook* h, const nn::Layer* l) {
    if (h) h->on_layer_ready(l->index());
  }

  std::string name_;

 private:
  void bind_all(ops::Device& d);
  ops::Device& dev_;
  std::vector<nn::Layer*> layers_;
  std::vector<std::unique_ptr<nn::Layer>> owned_;
  Arena params_, grads_, buffers_;
};

// "mlp", "cnn", "resnet20", "gpt-mini", "gpt2[:...]", "llama[:...]" (a spec, core/models/model_spec.h; the
// model's name() is the spec as given), built for `dev` (every model runs on every device); throws
// dd::UsageError for an unknown name.
std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed, ops::Device& dev = ops::host_device());
const std::vector<std::string>& model_names();

}  // namespace dd::models
