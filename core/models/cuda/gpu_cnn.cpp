// cnn on the GPU: core/models/cnn.cpp with dd::cuops calls ([conv3x3 1->32, BN, ReLU], [conv3x3 32->64, BN,
// ReLU], maxpool2, [conv3x3 64->128, BN, ReLU], maxpool2, fc 6272->256, ReLU, fc 256->10).
#include "core/common/error.h"
#include "core/models/cuda/gpu_arch.h"

namespace dd::models::gpu {
namespace {

class GpuCnn : public GpuArch {
 public:
  GpuCnn(const Model& cpu, const DeviceArenas& a)
      : conv1_(layer(cpu, 0), a), bn1_(layer(cpu, 1), a), conv2_(layer(cpu, 2), a), bn2_(layer(cpu, 3), a),
        conv3_(layer(cpu, 4), a), bn3_(layer(cpu, 5), a), fc1_(layer(cpu, 6), a), fc2_(layer(cpu, 7), a) {}

  ForwardResult forward(const Input& in, bool train) override {
    const int64_t N = n_ = in.n;
    x_ = in.x;
    y_ = in.y;
    const int64_t A = N * 28 * 28, B = N * 14 * 14, C = N * 7 * 7;
    for (auto* b : {&c1_, &r1_}) b->ensure(size_t(32 * A));
    for (auto* b : {&c2_, &r2_}) b->ensure(size_t(64 * A));
    p2_.ensure(size_t(64 * B));
    idx2_.ensure(size_t(64 * B));
    for (auto* b : {&c3_, &r3_}) b->ensure(size_t(128 * B));
    p3_.ensure(size_t(128 * C));
    idx3_.ensure(size_t(128 * C));
    f1_.ensure(size_t(N * 256));
    logits_.ensure(size_t(N * 10));
    probs_.ensure(size_t(N * 10));

    conv1_.forward(c1_.data(), in.x, N, 28, 28);
    bn1_.forward(r1_.data(), c1_.data(), N, 28 * 28, train);
    cuops::relu_forward(r1_.data(), r1_.data(), 32 * A);
    conv2_.forward(c2_.data(), r1_.data(), N, 28, 28);
    bn2_.forward(r2_.data(), c2_.data(), N, 28 * 28, train);
    cuops::relu_forward(r2_.data(), r2_.data(), 64 * A);
    cuops::maxpool2_forward(p2_.data(), idx2_.data(), r2_.data(), N, 64, 28, 28);
    conv3_.forward(c3_.data(), p2_.data(), N, 14, 14);
    bn3_.forward(r3_.data(), c3_.data(), N, 14 * 14, train);
    cuops::relu_forward(r3_.data(), r3_.data(), 128 * B);
    cuops::maxpool2_forward(p3_.data(), idx3_.data(), r3_.data(), N, 128, 14, 14);
    fc1_.forward(f1_.data(), p3_.data(), N);
    cuops::relu_forward(f1_.data(), f1_.data(), N * 256);
    fc2_.forward(logits_.data(), f1_.data(), N);
    ForwardResult r;
    r.loss = cuops::softmax_xent_forward(probs_.data(), logits_.data(), in.y, N, 10, &r.correct);
    r.predictions = N;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t N = n_;
    const int64_t A = N * 28 * 28, B = N * 14 * 14, C = N * 7 * 7;
    dlogits_.ensure(size_t(N * 10));
    df1_.ensure(size_t(N * 256));
    dp3_.ensure(size_t(128 * C));
    dr3_.ensure(size_t(128 * B));
    dc3_.ensure(size_t(128 * B));
    dp2_.ensure(size_t(64 * B));
    dr2_.ensure(size_t(64 * A));
    dc2_.ensure(size_t(64 * A));
    dr1_.ensure(size_t(32 * A));
    dc1_.ensure(size_t(32 * A));

    cuops::softmax_xent_backward(dlogits_.data(), probs_.data(), y_, N, 10, scale / float(N));
    fc2_.backward(df1_.data(), dlogits_.data(), f1_.data(), N);
    notify(hook, fc2_.index);
    cuops::relu_backward(df1_.data(), df1_.data(), f1_.data(), N * 256);
    fc1_.backward(dp3_.data(), df1_.data(), p3_.data(), N);
    notify(hook, fc1_.index);
    cuops::maxpool2_backward(dr3_.data(), dp3_.data(), idx3_.data(), N, 128, 14, 14);
    cuops::relu_backward(dr3_.data(), dr3_.data(), r3_.data(), 128 * B);
    bn3_.backward(dc3_.data(), dr3_.data(), c3_.data(), N, 14 * 14);
    notify(hook, bn3_.index);
    conv3_.backward(dp2_.data(), dc3_.data(), p2_.data(), N, 14, 14);
    notify(hook, conv3_.index);
    cuops::maxpool2_backward(dr2_.data(), dp2_.data(), idx2_.data(), N, 64, 28, 28);
    cuops::relu_backward(dr2_.data(), dr2_.data(), r2_.data(), 64 * A);
    bn2_.backward(dc2_.data(), dr2_.data(), c2_.data(), N, 28 * 28);
    notify(hook, bn2_.index);
    conv2_.backward(dr1_.data(), dc2_.data(), r1_.data(), N, 28, 28);
    notify(hook, conv2_.index);
    cuops::relu_backward(dr1_.data(), dr1_.data(), r1_.data(), 32 * A);
    bn1_.backward(dc1_.data(), dr1_.data(), c1_.data(), N, 28 * 28);
    notify(hook, bn1_.index);
    conv1_.backward(nullptr, dc1_.data(), x_, N, 28, 28);
    notify(hook, conv1_.index);
  }

 private:
  static const nn::Layer* layer(const Model& cpu, int i) {
    DD_CHECK(cpu.num_layers() == 8, "GPU cnn: expected 8 layers, the CPU model has " +
                                        std::to_string(cpu.num_layers()));
    return cpu.layers()[size_t(i)];
  }

  DevConv conv1_;
  DevBatchNorm bn1_;
  DevConv conv2_;
  DevBatchNorm bn2_;
  DevConv conv3_;
  DevBatchNorm bn3_;
  DevLinear fc1_, fc2_;
  DeviceFloats c1_, r1_, c2_, r2_, p2_, c3_, r3_, p3_, f1_, logits_, probs_;
  DeviceFloats dlogits_, df1_, dp3_, dr3_, dc3_, dp2_, dr2_, dc2_, dr1_, dc1_;
  DeviceArray<uint8_t> idx2_, idx3_;
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuArch> make_gpu_cnn(const Model& cpu, const DeviceArenas& a) {
  return std::make_unique<GpuCnn>(cpu, a);
}

}  // namespace dd::models::gpu
