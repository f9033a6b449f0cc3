// mlp: 784-W-W-W-10 with ReLU (docs/cli.md), layers fc1..fc4; W = 1024 unless `mlp:width=W`.
#include "core/models/model_spec.h"
#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

class Mlp : public Model {
 public:
  Mlp(int64_t width, uint64_t seed, ops::Device& dev) : Model(dev) {
    name_ = "mlp";
    const int64_t dims[5] = {784, width, width, width, 10};
    for (int i = 0; i < 4; ++i)
      fc_[i] = add("fc" + std::to_string(i + 1), std::make_unique<nn::Linear>(dims[i], dims[i + 1]));
    finalize(seed);
  }
  std::vector<int64_t> input_shape() const override { return {1, 28, 28}; }
  int num_classes() const override { return 10; }

  ForwardResult forward(const Input& in, bool) override {
    n_ = in.n;
    y_ = in.y;
    x_ = in.x;
    const float* h = in.x;
    for (int i = 0; i < 4; ++i) {
      act_[i].ensure(n_ * fc_[i]->out);
      fc_[i]->forward(act_[i].data(), h, n_, /*relu=*/i < 3);
      h = act_[i].data();
    }
    probs_.ensure(n_ * 10);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), act_[3].data(), in.y, n_, 10, &r.correct);
    r.predictions = n_;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    for (int i = 0; i < 4; ++i) dact_[i].ensure(n_ * fc_[i]->out);
    device().softmax_xent_backward(dact_[3].data(), probs_.data(), y_, n_, 10, scale / float(n_));
    for (int i = 3; i >= 0; --i) {
      const float* x = i == 0 ? x_ : act_[i - 1].data();
      float* dx = i == 0 ? nullptr : dact_[i - 1].data();
      fc_[i]->backward(dx, dact_[i].data(), x, n_);
      notify(hook, fc_[i]);
      if (i > 0) device().relu_backward(dx, dx, act_[i - 1].data(), n_ * fc_[i - 1]->out);
    }
  }

 private:
  nn::Linear* fc_[4];
  Arena act_[4] = {scratch(), scratch(), scratch(), scratch()};
  Arena dact_[4] = {scratch(), scratch(), scratch(), scratch()};
  Arena probs_ = scratch();
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_mlp(ModelSpec& spec, uint64_t seed, ops::Device& dev) {
  // The same four layers at any width: tests and examples that need many ranks or steps, not a big model.
  const int64_t width = spec.get("width", 1024, 1, 65536);
  return std::make_unique<Mlp>(width, seed, dev);
}

}  // namespace dd::models
