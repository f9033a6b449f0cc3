// gpt-mini: byte-level GPT (docs/cli.md): vocab 256, context 128, 4 pre-LN blocks, d=256, 4 heads, MLP 4d with
// GELU, learned positions, untied head without bias. Layer names: wte, wpe, blocks.i.{ln1,attn.qkv,attn.proj,
// ln2,mlp.fc,mlp.proj}, ln_f, head.
#include <cmath>

#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

constexpr int64_t V = 256, T = 128, D = 256, NH = 4, L = 4;

struct GptBlock {
  explicit GptBlock(ops::Device& d) : dev(d) {}
  ops::Device& dev;
  nn::LayerNorm *ln1, *ln2;
  nn::Linear *qkv, *proj, *fc, *fc2;
  const float* x = nullptr;  // residual stream in
  Arena a{dev}, qkvb{dev}, att{dev}, y{dev}, x1{dev}, m{dev}, h{dev}, g{dev}, out{dev};
};

class GptMini : public Model {
 public:
  GptMini(uint64_t seed, ops::Device& dev) : Model(dev) {
    name_ = "gpt-mini";
    wte_ = add("wte", std::make_unique<nn::Embedding>(V, D));
    wpe_ = add("wpe", std::make_unique<nn::Embedding>(T, D));
    for (int i = 0; i < L; ++i) {
      std::string p = "blocks." + std::to_string(i) + ".";
      auto b = std::make_unique<GptBlock>(dev);
      b->ln1 = add(p + "ln1", std::make_unique<nn::LayerNorm>(D));
      b->qkv = add(p + "attn.qkv", std::make_unique<nn::Linear>(D, 3 * D));
      b->proj = add(p + "attn.proj", std::make_unique<nn::Linear>(D, D));
      b->ln2 = add(p + "ln2", std::make_unique<nn::LayerNorm>(D));
      b->fc = add(p + "mlp.fc", std::make_unique<nn::Linear>(D, 4 * D));
      b->fc2 = add(p + "mlp.proj", std::make_unique<nn::Linear>(4 * D, D));
      blocks_.push_back(std::move(b));
    }
    lnf_ = add("ln_f", std::make_unique<nn::LayerNorm>(D));
    head_ = add("head", std::make_unique<nn::Linear>(D, V, false));
    finalize(seed);
  }
  std::vector<int64_t> input_shape() const override { return {T}; }
  bool takes_tokens() const override { return true; }
  int num_classes() const override { return int(V); }
  int64_t vocab() const override { return V; }
  int64_t targets_per_sample() const override { return T; }

  ForwardResult forward(const Input& in, bool) override {
    B_ = in.n;
    const int64_t BT = B_ * T;
    tokens_ = in.tokens;
    y_ = in.y;
    upload_positions(BT);
    x0_.ensure(BT * D);
    tmp_.ensure(BT * D);
    wte_->forward(x0_.data(), in.tokens, BT);
    wpe_->forward(tmp_.data(), pos_.data(), BT);
    device().add_inplace(x0_.data(), tmp_.data(), BT * D);
    const float* x = x0_.data();
    for (auto& b : blocks_) x = block_forward(*b, x);
    xl_ = x;
    lnf_out_.ensure(BT * D);
    logits_.ensure(BT * V);
    probs_.ensure(BT * V);
    lnf_->forward(lnf_out_.data(), x, BT);
    head_->forward(logits_.data(), lnf_out_.data(), BT);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), logits_.data(), in.y, BT, V, &r.correct);
    r.predictions = BT;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t BT = B_ * T;
    dlogits_.ensure(BT * V);
    dln_.ensure(BT * D);
    dx_.ensure(BT * D);
    dtmp_.ensure(BT * D);
    device().softmax_xent_backward(dlogits_.data(), probs_.data(), y_, BT, V, scale / float(BT));
    head_->backward(dln_.data(), dlogits_.data(), lnf_out_.data(), BT);
    notify(hook, head_);
    lnf_->backward(dx_.data(), dln_.data(), xl_, BT);
    notify(hook, lnf_);
    for (int i = L - 1; i >= 0; --i) block_backward(*blocks_[i], hook);
    wpe_->backward(dx_.data(), pos_.data(), BT);
    notify(hook, wpe_);
    wte_->backward(dx_.data(), tokens_, BT);
    notify(hook, wte_);
  }

 private:
  // Position ids i % T, copied to the device only when the batch size changes (setup, not a per-step copy).
  void upload_positions(int64_t BT) {
    if (pos_rows_ == BT) return;
    std::vector<int32_t> h(static_cast<size_t>(BT));
    for (int64_t i = 0; i < BT; ++i) h[size_t(i)] = int32_t(i % T);
    pos_.ensure(size_t(BT));
    device().copy_from_host(pos_.data(), h.data(), sizeof(int32_t) * size_t(BT));
    pos_rows_ = BT;
  }

  const float* block_forward(GptBlock& b, const float* x) {
    const int64_t BT = B_ * T;
    b.x = x;
    b.a.ensure(BT * D);
    b.qkvb.ensure(BT * 3 * D);
    b.att.ensure(B_ * NH * T * T);
    b.y.ensure(BT * D);
    b.x1.ensure(BT * D);
    b.m.ensure(BT * D);
    b.h.ensure(BT * 4 * D);
    b.g.ensure(BT * 4 * D);
    b.out.ensure(BT * D);
    b.ln1->forward(b.a.data(), x, BT);
    b.qkv->forward(b.qkvb.data(), b.a.data(), BT);
    device().attention_forward(b.y.data(), b.att.data(), b.qkvb.data(), B_, T, D, NH);
    b.proj->forward(b.x1.data(), b.y.data(), BT);
    device().add_inplace(b.x1.data(), x, BT * D);
    b.ln2->forward(b.m.data(), b.x1.data(), BT);
    b.fc->forward(b.h.data(), b.m.data(), BT);
    device().gelu_forward(b.g.data(), b.h.data(), BT * 4 * D);
    b.fc2->forward(b.out.data(), b.g.data(), BT);
    device().add_inplace(b.out.data(), b.x1.data(), BT * D);
    return b.out.data();
  }

  // dx_ holds d(block output) on entry and d(block input) on exit.
  void block_backward(GptBlock& b, nn::BackwardHook* hook) {
    const int64_t BT = B_ * T;
    dg_.ensure(BT * 4 * D);
    dy_.ensure(BT * D);
    dqkv_.ensure(BT * 3 * D);
    scratch_.ensure(device().attention_scratch_floats(B_, T, D, NH));
    b.fc2->backward(dg_.data(), dx_.data(), b.g.data(), BT);
    notify(hook, b.fc2);
    device().gelu_backward(dg_.data(), dg_.data(), b.h.data(), BT * 4 * D);
    b.fc->backward(dtmp_.data(), dg_.data(), b.m.data(), BT);
    notify(hook, b.fc);
    b.ln2->backward(dln_.data(), dtmp_.data(), b.x1.data(), BT);
    notify(hook, b.ln2);
    device().add_inplace(dx_.data(), dln_.data(), BT * D);  // d x1
    b.proj->backward(dy_.data(), dx_.data(), b.y.data(), BT);
    notify(hook, b.proj);
    device().attention_backward(dqkv_.data(), scratch_.data(), dy_.data(), b.qkvb.data(), b.att.data(), B_, T, D, NH);
    b.qkv->backward(dtmp_.data(), dqkv_.data(), b.a.data(), BT);
    notify(hook, b.qkv);
    b.ln1->backward(dln_.data(), dtmp_.data(), b.x, BT);
    notify(hook, b.ln1);
    device().add_inplace(dx_.data(), dln_.data(), BT * D);  // d x
  }

  nn::Embedding *wte_, *wpe_;
  nn::LayerNorm* lnf_;
  nn::Linear* head_;
  std::vector<std::unique_ptr<GptBlock>> blocks_;
  ops::DeviceArray<int32_t> pos_ = scratch<int32_t>();
  int64_t pos_rows_ = -1;
  Arena x0_ = scratch(), tmp_ = scratch(), lnf_out_ = scratch(), logits_ = scratch(), probs_ = scratch();
  Arena dlogits_ = scratch(), dln_ = scratch(), dx_ = scratch(), dtmp_ = scratch(), dg_ = scratch(), dy_ = scratch(),
        dqkv_ = scratch(), scratch_ = scratch();
  const float* xl_ = nullptr;
  const int32_t* tokens_ = nullptr;
  const int32_t* y_ = nullptr;
  int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_gpt_mini(uint64_t seed, ops::Device& dev) {
  return std::make_unique<GptMini>(seed, dev);
}

}  // namespace dd::models
