// gpt-mini on the GPU: core/models/gpt_mini.cpp with dd::cuops calls (vocab 256, context 128, 4 pre-LN blocks,
// d=256, 4 heads, GELU MLP, learned positions, untied head without bias). Same buffers, same op order.
#include "core/common/error.h"
#include "core/models/cuda/gpu_arch.h"

namespace dd::models::gpu {
namespace {

constexpr int64_t V = 256, T = 128, D = 256, NH = 4, L = 4;
constexpr int kLayers = 2 + 6 * L + 2;

struct GpuBlock {
  GpuBlock(const Model& cpu, int first, const DeviceArenas& a)
      : ln1(cpu.layers()[size_t(first)], a), qkv(cpu.layers()[size_t(first + 1)], a),
        proj(cpu.layers()[size_t(first + 2)], a), ln2(cpu.layers()[size_t(first + 3)], a),
        fc(cpu.layers()[size_t(first + 4)], a), fc2(cpu.layers()[size_t(first + 5)], a) {}
  DevLayerNorm ln1;
  DevLinear qkv, proj;
  DevLayerNorm ln2;
  DevLinear fc, fc2;
  const float* x = nullptr;  // residual stream in
  DeviceFloats a, qkvb, att, y, x1, m, h, g, out;
};

class GpuGptMini : public GpuArch {
 public:
  GpuGptMini(const Model& cpu, const DeviceArenas& a)
      : wte_(layer(cpu, 0), a), wpe_(layer(cpu, 1), a), lnf_(layer(cpu, kLayers - 2), a),
        head_(layer(cpu, kLayers - 1), a) {
    for (int i = 0; i < L; ++i) blocks_.push_back(std::make_unique<GpuBlock>(cpu, 2 + 6 * i, a));
    DD_CHECK(wte_.V == V && wte_.C == D && wpe_.V == T && head_.out == V,
             "GPU gpt-mini: the CPU model's dimensions differ from the ones this code is written for");
  }

  ForwardResult forward(const Input& in, bool) override {
    B_ = in.n;
    const int64_t BT = B_ * T;
    tokens_ = in.tokens;
    y_ = in.y;
    upload_positions(BT);
    x0_.ensure(size_t(BT * D));
    tmp_.ensure(size_t(BT * D));
    wte_.forward(x0_.data(), in.tokens, BT);
    wpe_.forward(tmp_.data(), pos_.data(), BT);
    cuops::add_inplace(x0_.data(), tmp_.data(), BT * D);
    const float* x = x0_.data();
    for (auto& b : blocks_) x = block_forward(*b, x);
    xl_ = x;
    lnf_out_.ensure(size_t(BT * D));
    logits_.ensure(size_t(BT * V));
    probs_.ensure(size_t(BT * V));
    lnf_.forward(lnf_out_.data(), x, BT);
    head_.forward(logits_.data(), lnf_out_.data(), BT);
    ForwardResult r;
    r.loss = cuops::softmax_xent_forward(probs_.data(), logits_.data(), in.y, BT, V, &r.correct);
    r.predictions = BT;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t BT = B_ * T;
    dlogits_.ensure(size_t(BT * V));
    dln_.ensure(size_t(BT * D));
    dx_.ensure(size_t(BT * D));
    dtmp_.ensure(size_t(BT * D));
    cuops::softmax_xent_backward(dlogits_.data(), probs_.data(), y_, BT, V, scale / float(BT));
    head_.backward(dln_.data(), dlogits_.data(), lnf_out_.data(), BT);
    notify(hook, head_.index);
    lnf_.backward(dx_.data(), dln_.data(), xl_, BT);
    notify(hook, lnf_.index);
    for (int i = L - 1; i >= 0; --i) block_backward(*blocks_[size_t(i)], hook);
    wpe_.backward(dx_.data(), pos_.data(), BT);
    notify(hook, wpe_.index);
    wte_.backward(dx_.data(), tokens_, BT);
    notify(hook, wte_.index);
  }

 private:
  static const nn::Layer* layer(const Model& cpu, int i) {
    DD_CHECK(cpu.num_layers() == kLayers, "GPU gpt-mini: expected " + std::to_string(kLayers) +
                                              " layers, the CPU model has " + std::to_string(cpu.num_layers()));
    return cpu.layers()[size_t(i)];
  }

  // Position ids i % T; uploaded only when the batch size changes (a setup copy, not a per-step one).
  void upload_positions(int64_t BT) {
    if (pos_rows_ == BT) return;
    std::vector<int32_t> h(static_cast<size_t>(BT));
    for (int64_t i = 0; i < BT; ++i) h[size_t(i)] = int32_t(i % T);
    pos_.ensure(size_t(BT));
    DD_CUDA_CHECK(cudaMemcpy(pos_.data(), h.data(), sizeof(int32_t) * size_t(BT), cudaMemcpyHostToDevice));
    pos_rows_ = BT;
  }

  const float* block_forward(GpuBlock& b, const float* x) {
    const int64_t BT = B_ * T;
    b.x = x;
    b.a.ensure(size_t(BT * D));
    b.qkvb.ensure(size_t(BT * 3 * D));
    b.att.ensure(size_t(B_ * NH * T * T));
    b.y.ensure(size_t(BT * D));
    b.x1.ensure(size_t(BT * D));
    b.m.ensure(size_t(BT * D));
    b.h.ensure(size_t(BT * 4 * D));
    b.g.ensure(size_t(BT * 4 * D));
    b.out.ensure(size_t(BT * D));
    b.ln1.forward(b.a.data(), x, BT);
    b.qkv.forward(b.qkvb.data(), b.a.data(), BT);
    cuops::attention_forward(b.y.data(), b.att.data(), b.qkvb.data(), B_, T, D, NH);
    b.proj.forward(b.x1.data(), b.y.data(), BT);
    cuops::add_inplace(b.x1.data(), x, BT * D);
    b.ln2.forward(b.m.data(), b.x1.data(), BT);
    b.fc.forward(b.h.data(), b.m.data(), BT);
    cuops::gelu_forward(b.g.data(), b.h.data(), BT * 4 * D);
    b.fc2.forward(b.out.data(), b.g.data(), BT);
    cuops::add_inplace(b.out.data(), b.x1.data(), BT * D);
    return b.out.data();
  }

  // dx_ holds d(block output) on entry and d(block input) on exit.
  void block_backward(GpuBlock& b, nn::BackwardHook* hook) {
    const int64_t BT = B_ * T;
    dg_.ensure(size_t(BT * 4 * D));
    dy_.ensure(size_t(BT * D));
    dqkv_.ensure(size_t(BT * 3 * D));
    scratch_.ensure(size_t(cuops::attention_scratch_floats(B_, T, D, NH)));
    b.fc2.backward(dg_.data(), dx_.data(), b.g.data(), BT);
    notify(hook, b.fc2.index);
    cuops::gelu_backward(dg_.data(), dg_.data(), b.h.data(), BT * 4 * D);
    b.fc.backward(dtmp_.data(), dg_.data(), b.m.data(), BT);
    notify(hook, b.fc.index);
    b.ln2.backward(dln_.data(), dtmp_.data(), b.x1.data(), BT);
    notify(hook, b.ln2.index);
    cuops::add_inplace(dx_.data(), dln_.data(), BT * D);  // d x1
    b.proj.backward(dy_.data(), dx_.data(), b.y.data(), BT);
    notify(hook, b.proj.index);
    cuops::attention_backward(dqkv_.data(), scratch_.data(), dy_.data(), b.qkvb.data(), b.att.data(), B_, T, D,
                              NH);
    b.qkv.backward(dtmp_.data(), dqkv_.data(), b.a.data(), BT);
    notify(hook, b.qkv.index);
    b.ln1.backward(dln_.data(), dtmp_.data(), b.x, BT);
    notify(hook, b.ln1.index);
    cuops::add_inplace(dx_.data(), dln_.data(), BT * D);  // d x
  }

  DevEmbedding wte_, wpe_;
  DevLayerNorm lnf_;
  DevLinear head_;
  std::vector<std::unique_ptr<GpuBlock>> blocks_;
  DeviceArray<int32_t> pos_;
  int64_t pos_rows_ = -1;
  DeviceFloats x0_, tmp_, lnf_out_, logits_, probs_;
  DeviceFloats dlogits_, dln_, dx_, dtmp_, dg_, dy_, dqkv_, scratch_;
  const float* xl_ = nullptr;
  const int32_t* tokens_ = nullptr;
  const int32_t* y_ = nullptr;
  int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<GpuArch> make_gpu_gpt_mini(const Model& cpu, const DeviceArenas& a) {
  return std::make_unique<GpuGptMini>(cpu, a);
}

}  // namespace dd::models::gpu
