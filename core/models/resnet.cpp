// resnet18 / resnet50[:image=32,classes=10,stem=imagenet]: torchvision's ImageNet ResNets (docs/models.md) on
// 3 x image x image: stem conv7x7/2 + BN + ReLU + maxpool3x3/2, four stages of basic (2-2-2-2) or bottleneck
// (3-4-6-3) blocks at 64-128-256-512 channels (stride 2 from the second stage on, on the 3x3 conv), global average
// pool, fc. stem=cifar is the CIFAR ResNets' stem instead: conv3x3/1 (padding 1) + BN + ReLU, no max-pool, so the
// stages run at the full image resolution. Layer names and order are torch's parameter-owning modules: conv1,
// bn1, layer1.0.conv1, ..., fc.
#include <algorithm>

#include "base/error.h"
#include "core/models/model_spec.h"
#include "core/models/resnet_blocks.h"
#include "core/models/zoo.h"
#include "core/ops/ops.h"

namespace dd::models {
namespace {

class ResNet : public Model {
 public:
  ResNet(const std::string& name, bool bottleneck, const int (&depth)[4], int64_t image, int64_t classes,
         bool cifar, uint64_t seed, ops::Device& dev)
      : Model(dev), image_(image), classes_(classes), pool_stem_(!cifar), scratch_(dev) {
    name_ = name;
    conv1_ = add("conv1", cifar ? std::make_unique<KaimingConv>(3, 64, 3, 1, 1)
                                : std::make_unique<KaimingConv>(3, 64, 7, 2, 3));
    bn1_ = add("bn1", std::make_unique<nn::BatchNorm>(64));
    h1_ = conv1_->out_h(image);
    hp_ = pool_stem_ ? ops::maxpool_out(h1_, 3, 2, 1) : h1_;
    int64_t C = 64, H = hp_;
    for (int s = 0; s < 4; ++s) {
      for (int b = 0; b < depth[s]; ++b) {
        const std::string prefix = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
        const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
        auto blk = std::make_unique<ResBlock>(dev, bottleneck, C, int64_t(64) << s, stride, H, H,
                                              [&](const std::string& n, std::unique_ptr<nn::Layer> l) {
                                                return add(prefix + n, std::move(l));
                                              });
        C = blk->OC;
        H = blk->Ho;
        blocks_.push_back(std::move(blk));
      }
    }
    feat_ = C;
    hw_last_ = H * H;
    fc_ = add("fc", std::make_unique<nn::Linear>(feat_, classes_));
    finalize(seed);
  }

  std::vector<int64_t> input_shape() const override { return {3, image_, image_}; }
  int num_classes() const override { return int(classes_); }

  ForwardResult forward(const Input& in, bool train) override {
    const int64_t N = n_ = in.n;
    y_ = in.y;
    x_ = in.x;
    const float* h = stem_forward(N, train);
    for (auto& b : blocks_) h = b->forward(h, N, train, scratch_);
    pooled_.ensure(size_t(N * feat_));
    device().avgpool_global_forward(pooled_.data(), h, N, feat_, hw_last_);
    logits_.ensure(size_t(N * classes_));
    probs_.ensure(size_t(N * classes_));
    fc_->forward(logits_.data(), pooled_.data(), N);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), logits_.data(), in.y, N, classes_, &r.correct);
    r.predictions = N;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t N = n_;
    dlogits_.ensure(size_t(N * classes_));
    dpooled_.ensure(size_t(N * feat_));
    device().softmax_xent_backward(dlogits_.data(), probs_.data(), y_, N, classes_, scale / float(N));
    fc_->backward(dpooled_.data(), dlogits_.data(), pooled_.data(), N);
    notify(hook, fc_);
    // The last block's output gradient starts in scratch dx[1]; blocks alternate between dx[0] and dx[1].
    scratch_.dx[1].ensure(size_t(N * feat_ * hw_last_));
    float* dy = scratch_.dx[1].data();
    device().avgpool_global_backward(dy, dpooled_.data(), N, feat_, hw_last_);
    for (size_t i = blocks_.size(); i-- > 0;) dy = blocks_[i]->backward(dy, N, hook, scratch_);
    stem_backward(dy, N, hook);
  }

 private:
  // conv1 + bn1 + ReLU (+ the max-pool of the ImageNet stem) into the first block's input.
  const float* stem_forward(int64_t N, bool train) {
    const int64_t n1 = N * 64 * h1_ * h1_;
    stem_c_.ensure(size_t(n1));
    stem_r_.ensure(size_t(n1));
    conv1_->forward(stem_c_.data(), x_, N, image_, image_);
    bn1_->forward(stem_r_.data(), stem_c_.data(), N, h1_ * h1_, train);
    device().relu_forward(stem_r_.data(), stem_r_.data(), n1);
    if (!pool_stem_) return stem_r_.data();
    pool_.ensure(size_t(N * 64 * hp_ * hp_));
    pool_idx_.ensure(size_t(N * 64 * hp_ * hp_));
    device().maxpool_forward(pool_.data(), pool_idx_.data(), stem_r_.data(), N, 64, h1_, h1_, 3, 2, 1);
    return pool_.data();
  }

  // dy: the gradient of the first block's input.
  void stem_backward(const float* dy, int64_t N, nn::BackwardHook* hook) {
    const int64_t n1 = N * 64 * h1_ * h1_;
    stem_d_.ensure(size_t(n1));
    stem_dc_.ensure(size_t(n1));
    if (pool_stem_) {
      device().maxpool_backward(stem_d_.data(), dy, pool_idx_.data(), N, 64, h1_, h1_, 3, 2, 1);
      dy = stem_d_.data();
    }
    device().relu_backward(stem_d_.data(), dy, stem_r_.data(), n1);
    bn1_->backward(stem_dc_.data(), stem_d_.data(), stem_c_.data(), N, h1_ * h1_);
    notify(hook, bn1_);
    conv1_->backward(nullptr, stem_dc_.data(), x_, N, image_, image_);
    notify(hook, conv1_);
  }

  int64_t image_, classes_, h1_ = 0, hp_ = 0, feat_ = 0, hw_last_ = 0;
  bool pool_stem_;
  nn::Conv* conv1_;
  nn::BatchNorm* bn1_;
  nn::Linear* fc_;
  std::vector<std::unique_ptr<ResBlock>> blocks_;
  BlockScratch scratch_;
  Arena stem_c_ = scratch(), stem_r_ = scratch(), pool_ = scratch(), pooled_ = scratch(), logits_ = scratch(),
        probs_ = scratch(), dlogits_ = scratch(), dpooled_ = scratch(), stem_d_ = scratch(), stem_dc_ = scratch();
  ops::DeviceArray<int32_t> pool_idx_ = scratch<int32_t>();
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_resnet(ModelSpec& spec, uint64_t seed, ops::Device& dev) {
  const std::string& f = spec.family();
  const bool r50 = f == "resnet50";
  if (!r50 && f != "resnet18") throw UsageError("make_resnet: not a ResNet family '" + f + "'");
  // Any image size gives the same parameters (the global average pool takes the last stage's resolution);
  // 1 is the smallest input every stage accepts.
  const int64_t image = spec.get("image", 32, 1, 4096);
  const int64_t classes = spec.get("classes", 10, 1, 1 << 20);
  const bool cifar = spec.choose("stem", {"imagenet", "cifar"}) == "cifar";
  spec.finish();  // before the allocation: a mistyped option costs no memory
  static const int d18[4] = {2, 2, 2, 2}, d50[4] = {3, 4, 6, 3};
  return std::make_unique<ResNet>(spec.text(), r50, r50 ? d50 : d18, image, classes, cifar, seed, dev);
}

}  // namespace dd::models
