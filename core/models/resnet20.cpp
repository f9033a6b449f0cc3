// resnet20: CIFAR ResNet-20 on 1x28x28 (docs/cli.md): stem conv+BN+ReLU, 3 stages x 3 basic blocks
// (16/32/64 channels, stride 2 at stages 2-3, 1x1 conv+BN projection where the shape changes), GAP, fc.
#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

struct Block {
  explicit Block(ops::Device& d) : dev(d) {}
  ops::Device& dev;
  nn::Conv *conv1, *conv2, *sconv = nullptr;
  nn::BatchNorm *bn1, *bn2, *sbn = nullptr;
  int64_t C, OC, stride, H, W, Ho, Wo;  // input C x H x W -> OC x Ho x Wo
  const float* x = nullptr;              // block input (owned by the previous stage)
  Arena c1{dev}, r1{dev}, c2{dev}, b2{dev}, sc{dev}, sb{dev}, out{dev};
  Arena dc1{dev}, dr1{dev}, dc2{dev}, dsum{dev}, dsc{dev}, dx{dev}, dxs{dev};
};

class ResNet20 : public Model {
 public:
  ResNet20(uint64_t seed, ops::Device& dev) : Model(dev) {
    name_ = "resnet20";
    conv1_ = add("conv1", std::make_unique<nn::Conv>(1, 16, 3, 1, 1));
    bn1_ = add("bn1", std::make_unique<nn::BatchNorm>(16));
    int64_t C = 16, H = 28;
    const int64_t widths[3] = {16, 32, 64};
    for (int s = 0; s < 3; ++s) {
      for (int b = 0; b < 3; ++b) {
        int64_t OC = widths[s], stride = (s > 0 && b == 0) ? 2 : 1;
        std::string p = "stage" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
        auto blk = std::make_unique<Block>(dev);
        blk->C = C, blk->OC = OC, blk->stride = stride, blk->H = blk->W = H;
        blk->conv1 = add(p + "conv1", std::make_unique<nn::Conv>(C, OC, 3, stride, 1));
        blk->bn1 = add(p + "bn1", std::make_unique<nn::BatchNorm>(OC));
        blk->conv2 = add(p + "conv2", std::make_unique<nn::Conv>(OC, OC, 3, 1, 1));
        blk->bn2 = add(p + "bn2", std::make_unique<nn::BatchNorm>(OC));
        if (stride != 1 || C != OC) {
          blk->sconv = add(p + "shortcut.conv", std::make_unique<nn::Conv>(C, OC, 1, stride, 0));
          blk->sbn = add(p + "shortcut.bn", std::make_unique<nn::BatchNorm>(OC));
        }
        blk->Ho = blk->Wo = blk->conv1->out_h(H);
        H = blk->Ho;
        C = OC;
        blocks_.push_back(std::move(blk));
      }
    }
    fc_ = add("fc", std::make_unique<nn::Linear>(64, 10));
    finalize(seed);
  }
  std::vector<int64_t> input_shape() const override { return {1, 28, 28}; }
  int num_classes() const override { return 10; }

  ForwardResult forward(const Input& in, bool train) override {
    const int64_t N = n_ = in.n;
    x_ = in.x;
    y_ = in.y;
    stem_c_.ensure(N * 16 * 784);
    stem_r_.ensure(N * 16 * 784);
    conv1_->forward(stem_c_.data(), in.x, N, 28, 28);
    bn1_->forward(stem_r_.data(), stem_c_.data(), N, 784, train);
    device().relu_forward(stem_r_.data(), stem_r_.data(), N * 16 * 784);
    const float* h = stem_r_.data();
    for (auto& bp : blocks_) {
      h = block_forward(*bp, h, N, train);
    }
    pooled_.ensure(N * 64);
    device().avgpool_global_forward(pooled_.data(), h, N, 64, 49);
    logits_.ensure(N * 10);
    probs_.ensure(N * 10);
    fc_->forward(logits_.data(), pooled_.data(), N);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), logits_.data(), in.y, N, 10, &r.correct);
    r.predictions = N;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t N = n_;
    dlogits_.ensure(N * 10);
    dpooled_.ensure(N * 64);
    device().softmax_xent_backward(dlogits_.data(), probs_.data(), y_, N, 10, scale / float(N));
    fc_->backward(dpooled_.data(), dlogits_.data(), pooled_.data(), N);
    notify(hook, fc_);
    dlast_.ensure(N * 64 * 49);
    device().avgpool_global_backward(dlast_.data(), dpooled_.data(), N, 64, 49);
    float* dy = dlast_.data();
    for (int i = int(blocks_.size()) - 1; i >= 0; --i) dy = block_backward(*blocks_[i], dy, N, hook);
    device().relu_backward(dy, dy, stem_r_.data(), N * 16 * 784);
    stem_dc_.ensure(N * 16 * 784);
    bn1_->backward(stem_dc_.data(), dy, stem_c_.data(), N, 784);
    notify(hook, bn1_);
    conv1_->backward(nullptr, stem_dc_.data(), x_, N, 28, 28);
    notify(hook, conv1_);
  }

 private:
  const float* block_forward(Block& b, const float* x, int64_t N, bool train) {
    const int64_t in_hw = b.H * b.W, hw = b.Ho * b.Wo, n = N * b.OC * hw;
    b.x = x;
    for (auto* buf : {&b.c1, &b.r1, &b.c2, &b.b2, &b.out}) buf->ensure(n);
    b.conv1->forward(b.c1.data(), x, N, b.H, b.W);
    b.bn1->forward(b.r1.data(), b.c1.data(), N, hw, train);
    device().relu_forward(b.r1.data(), b.r1.data(), n);
    b.conv2->forward(b.c2.data(), b.r1.data(), N, b.Ho, b.Wo);
    b.bn2->forward(b.b2.data(), b.c2.data(), N, hw, train);
    const float* shortcut = x;
    if (b.sconv) {
      b.sc.ensure(n);
      b.sb.ensure(n);
      b.sconv->forward(b.sc.data(), x, N, b.H, b.W);
      b.sbn->forward(b.sb.data(), b.sc.data(), N, hw, train);
      shortcut = b.sb.data();
    }
    (void)in_hw;
    device().add(b.out.data(), b.b2.data(), shortcut, n);
    device().relu_forward(b.out.data(), b.out.data(), n);
    return b.out.data();
  }

  // dy: gradient w.r.t. the block output (post-ReLU); returns the gradient w.r.t. the block input.
  float* block_backward(Block& b, float* dy, int64_t N, nn::BackwardHook* hook) {
    const int64_t hw = b.Ho * b.Wo, n = N * b.OC * hw, nin = N * b.C * b.H * b.W;
    device().relu_backward(dy, dy, b.out.data(), n);  // dy is now d(sum)
    b.dx.ensure(nin);
    if (b.sconv) {
      b.dsc.ensure(n);
      b.dxs.ensure(nin);
      b.sbn->backward(b.dsc.data(), dy, b.sc.data(), N, hw);
      notify(hook, b.sbn);
      b.sconv->backward(b.dxs.data(), b.dsc.data(), b.x, N, b.H, b.W);
      notify(hook, b.sconv);
    }
    b.dc2.ensure(n);
    b.dr1.ensure(n);
    b.dc1.ensure(n);
    b.bn2->backward(b.dc2.data(), dy, b.c2.data(), N, hw);
    notify(hook, b.bn2);
    b.conv2->backward(b.dr1.data(), b.dc2.data(), b.r1.data(), N, b.Ho, b.Wo);
    notify(hook, b.conv2);
    device().relu_backward(b.dr1.data(), b.dr1.data(), b.r1.data(), n);
    b.bn1->backward(b.dc1.data(), b.dr1.data(), b.c1.data(), N, hw);
    notify(hook, b.bn1);
    b.conv1->backward(b.dx.data(), b.dc1.data(), b.x, N, b.H, b.W);
    notify(hook, b.conv1);
    device().add_inplace(b.dx.data(), b.sconv ? b.dxs.data() : dy, nin);
    return b.dx.data();
  }

  nn::Conv* conv1_;
  nn::BatchNorm* bn1_;
  nn::Linear* fc_;
  std::vector<std::unique_ptr<Block>> blocks_;
  Arena stem_c_ = scratch(), stem_r_ = scratch(), stem_dc_ = scratch(), pooled_ = scratch(), logits_ = scratch(),
        probs_ = scratch(), dlogits_ = scratch(), dpooled_ = scratch(), dlast_ = scratch();
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_resnet20(uint64_t seed, ops::Device& dev) {
  return std::make_unique<ResNet20>(seed, dev);
}

}  // namespace dd::models
