// cnn: [conv3x3 1->32, BN, ReLU], [conv3x3 32->64, BN, ReLU], maxpool2, [conv3x3 64->128, BN, ReLU], maxpool2,
// fc 6272->256, ReLU, fc 256->10 (docs/cli.md).
#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

class Cnn : public Model {
 public:
  Cnn(uint64_t seed, ops::Device& dev) : Model(dev) {
    name_ = "cnn";
    conv1_ = add("conv1", std::make_unique<nn::Conv>(1, 32, 3, 1, 1));
    bn1_ = add("bn1", std::make_unique<nn::BatchNorm>(32));
    conv2_ = add("conv2", std::make_unique<nn::Conv>(32, 64, 3, 1, 1));
    bn2_ = add("bn2", std::make_unique<nn::BatchNorm>(64));
    conv3_ = add("conv3", std::make_unique<nn::Conv>(64, 128, 3, 1, 1));
    bn3_ = add("bn3", std::make_unique<nn::BatchNorm>(128));
    fc1_ = add("fc1", std::make_unique<nn::Linear>(6272, 256));
    fc2_ = add("fc2", std::make_unique<nn::Linear>(256, 10));
    finalize(seed);
  }
  std::vector<int64_t> input_shape() const override { return {1, 28, 28}; }
  int num_classes() const override { return 10; }

  ForwardResult forward(const Input& in, bool train) override {
    const int64_t N = n_ = in.n;
    x_ = in.x;
    y_ = in.y;
    const int64_t A = N * 28 * 28, B = N * 14 * 14, C = N * 7 * 7;
    for (auto* b : {&c1_, &r1_}) b->ensure(32 * A);
    for (auto* b : {&c2_, &r2_}) b->ensure(64 * A);
    p2_.ensure(64 * B);
    idx2_.ensure(size_t(64 * B));
    for (auto* b : {&c3_, &r3_}) b->ensure(128 * B);
    p3_.ensure(128 * C);
    idx3_.ensure(size_t(128 * C));
    f1_.ensure(N * 256);
    logits_.ensure(N * 10);
    probs_.ensure(N * 10);

    conv1_->forward(c1_.data(), in.x, N, 28, 28);
    bn1_->forward(r1_.data(), c1_.data(), N, 28 * 28, train);
    device().relu_forward(r1_.data(), r1_.data(), 32 * A);
    conv2_->forward(c2_.data(), r1_.data(), N, 28, 28);
    bn2_->forward(r2_.data(), c2_.data(), N, 28 * 28, train);
    device().relu_forward(r2_.data(), r2_.data(), 64 * A);
    device().maxpool2_forward(p2_.data(), idx2_.data(), r2_.data(), N, 64, 28, 28);
    conv3_->forward(c3_.data(), p2_.data(), N, 14, 14);
    bn3_->forward(r3_.data(), c3_.data(), N, 14 * 14, train);
    device().relu_forward(r3_.data(), r3_.data(), 128 * B);
    device().maxpool2_forward(p3_.data(), idx3_.data(), r3_.data(), N, 128, 14, 14);
    fc1_->forward(f1_.data(), p3_.data(), N);
    device().relu_forward(f1_.data(), f1_.data(), N * 256);
    fc2_->forward(logits_.data(), f1_.data(), N);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), logits_.data(), in.y, N, 10, &r.correct);
    r.predictions = N;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t N = n_;
    const int64_t A = N * 28 * 28, B = N * 14 * 14, C = N * 7 * 7;
    dlogits_.ensure(N * 10);
    df1_.ensure(N * 256);
    dp3_.ensure(128 * C);
    dr3_.ensure(128 * B);
    dc3_.ensure(128 * B);
    dp2_.ensure(64 * B);
    dr2_.ensure(64 * A);
    dc2_.ensure(64 * A);
    dr1_.ensure(32 * A);
    dc1_.ensure(32 * A);

    device().softmax_xent_backward(dlogits_.data(), probs_.data(), y_, N, 10, scale / float(N));
    fc2_->backward(df1_.data(), dlogits_.data(), f1_.data(), N);
    notify(hook, fc2_);
    device().relu_backward(df1_.data(), df1_.data(), f1_.data(), N * 256);
    fc1_->backward(dp3_.data(), df1_.data(), p3_.data(), N);
    notify(hook, fc1_);
    device().maxpool2_backward(dr3_.data(), dp3_.data(), idx3_.data(), N, 128, 14, 14);
    device().relu_backward(dr3_.data(), dr3_.data(), r3_.data(), 128 * B);
    bn3_->backward(dc3_.data(), dr3_.data(), c3_.data(), N, 14 * 14);
    notify(hook, bn3_);
    conv3_->backward(dp2_.data(), dc3_.data(), p2_.data(), N, 14, 14);
    notify(hook, conv3_);
    device().maxpool2_backward(dr2_.data(), dp2_.data(), idx2_.data(), N, 64, 28, 28);
    device().relu_backward(dr2_.data(), dr2_.data(), r2_.data(), 64 * A);
    bn2_->backward(dc2_.data(), dr2_.data(), c2_.data(), N, 28 * 28);
    notify(hook, bn2_);
    conv2_->backward(dr1_.data(), dc2_.data(), r1_.data(), N, 28, 28);
    notify(hook, conv2_);
    device().relu_backward(dr1_.data(), dr1_.data(), r1_.data(), 32 * A);
    bn1_->backward(dc1_.data(), dr1_.data(), c1_.data(), N, 28 * 28);
    notify(hook, bn1_);
    conv1_->backward(nullptr, dc1_.data(), x_, N, 28, 28);
    notify(hook, conv1_);
  }

 private:
  nn::Conv *conv1_, *conv2_, *conv3_;
  nn::BatchNorm *bn1_, *bn2_, *bn3_;
  nn::Linear *fc1_, *fc2_;
  Arena c1_ = scratch(), r1_ = scratch(), c2_ = scratch(), r2_ = scratch(), p2_ = scratch(), c3_ = scratch(),
        r3_ = scratch(), p3_ = scratch(), f1_ = scratch(), logits_ = scratch(), probs_ = scratch();
  Arena dlogits_ = scratch(), df1_ = scratch(), dp3_ = scratch(), dr3_ = scratch(), dc3_ = scratch(),
        dp2_ = scratch(), dr2_ = scratch(), dc2_ = scratch(), dr1_ = scratch(), dc1_ = scratch();
  ops::DeviceArray<uint8_t> idx2_ = scratch<uint8_t>(), idx3_ = scratch<uint8_t>();
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<Model> make_cnn(uint64_t seed, ops::Device& dev) { return std::make_unique<Cnn>(seed, dev); }

}  // namespace dd::models
