// mlp on the GPU: core/models/mlp.cpp with dd::cuops calls (784-1024-1024-1024-10, ReLU).
#include "core/common/error.h"
#include "core/models/cuda/gpu_arch.h"

namespace dd::models::gpu {
namespace {

class GpuMlp : public GpuArch {
 public:
  GpuMlp(const Model& cpu, const DeviceArenas& a) {
    DD_CHECK(cpu.num_layers() == 4, "GPU mlp: expected 4 layers, the CPU model has " +
                                        std::to_string(cpu.num_layers()));
    for (int i = 0; i < 4; ++i) fc_.emplace_back(cpu.layers()[size_t(i)], a);
    classes_ = fc_[3].out;
  }

  ForwardResult forward(const Input& in, bool) override {
    n_ = in.n;
    y_ = in.y;
    x_ = in.x;
    const float* h = in.x;
    for (int i = 0; i < 4; ++i) {
      act_[i].ensure(size_t(n_ * fc_[i].out));
      fc_[i].forward(act_[i].data(), h, n_);
      if (i < 3) cuops::relu_forward(act_[i].data(), act_[i].data(), n_ * fc_[i].out);
      h = act_[i].data();
    }
    probs_.ensure(size_t(n_ * classes_));
    ForwardResult r;
    r.loss = cuops::softmax_xent_forward(probs_.data(), act_[3].data(), in.y, n_, classes_, &r.correct);
    r.predictions = n_;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    for (int i = 0; i < 4; ++i) dact_[i].ensure(size_t(n_ * fc_[i].out));
    cuops::softmax_xent_backward(dact_[3].data(), probs_.data(), y_, n_, classes_, scale / float(n_));
    for (int i = 3; i >= 0; --i) {
      const float* x = i == 0 ? x_ : act_[i - 1].data();
      float* dx = i == 0 ? nullptr : dact_[i - 1].data();
      fc_[i].backward(dx, dact_[i].data(), x, n_);
      notify(hook, fc_[i].index);
      if (i > 0) cuops::relu_backward(dx, dx, act_[i - 1].data(), n_ * fc_[i - 1].out);
    }
  }

 private:
  std::vector<DevLinear> fc_;
  int64_t classes_ = 0;
  DeviceFloats act_[4], dact_[4], probs_;
  int64_t n_ = 0;
  const float* x_ = nullptr;
  const int32_t* y_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuArch> make_gpu_mlp(const Model& cpu, const DeviceArenas& a) {
  return std::make_unique<GpuMlp>(cpu, a);
}

}  // namespace dd::models::gpu
