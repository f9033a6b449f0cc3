// gpt2[:layers=12,d=768,heads=12,ctx=128,vocab=50257,positions=1024] (docs/models.md): GPT-2 small by default.
// Learned positions (`positions` rows, at least ctx; ctx used per sample), pre-LN blocks whose linears carry
// biases, MLP 4d with exact GELU, final LayerNorm, head tied to the token embedding. The tie makes the head no
// layer of its own: its weight is wte's, its gradient accumulates into wte's gradient before the embedding
// backward adds the rest, and wte (layer 0, notified last) is synced once with both contributions.
// Layers in the order and under the names of the PyTorch peer's parameter-owning modules (registration order):
// wte, wpe, blocks.i.{ln1, ln2, qkv, proj, fc, fc2}, ln. Within a block that order differs from the order in
// which gradients become final (ln2's before proj's); the hook still fires in strictly decreasing index order,
// ln2 after qkv. Initialization is GPT-2's (N(0, 0.02), residual projections scaled by 1/sqrt(2 layers)).
#include <cmath>

#include "base/error.h"
#include "core/models/model_spec.h"
#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

struct Gpt2Config {
  int64_t L, D, NH, T, V, P;
};

Gpt2Config parse_config(ModelSpec& s) {
  Gpt2Config c;
  c.L = s.get("layers", 12, 1, 1024);
  c.D = s.get("d", 768, 1, 1 << 16);
  c.NH = s.get("heads", 12, 1, 1 << 12);
  c.T = s.get("ctx", 128, 1, 1 << 16);
  c.V = s.get("vocab", 50257, 256, 1 << 24);  // tokens of every dataset are bytes (< 256) or below the vocab
  c.P = s.get("positions", 1024, 1, 1 << 20);
  if (c.D % c.NH != 0)
    throw UsageError("model '" + s.text() + "': d=" + std::to_string(c.D) + " is not a multiple of heads=" +
                     std::to_string(c.NH));
  c.P = std::max(c.P, c.T);  // as the peer: a context longer than `positions` gets ctx rows
  return c;
}

struct Block {
  explicit Block(ops::Device& d) : dev(d) {}
  ops::Device& dev;
  nn::LayerNorm *ln1, *ln2;
  nn::Linear *qkv, *proj, *fc, *fc2;
  const float* x = nullptr;  // residual stream in
  Arena a{dev}, qkvb{dev}, att{dev}, y{dev}, x1{dev}, m{dev}, h{dev}, g{dev}, out{dev};
};

class Gpt2 : public Model {
 public:
  Gpt2(const std::string& spec, const Gpt2Config& c, uint64_t seed, ops::Device& dev)
      : Model(dev), L_(c.L), D_(c.D), NH_(c.NH), T_(c.T), V_(c.V) {
    name_ = spec;
    wte_ = add("wte", std::make_unique<nn::Embedding>(V_, D_));
    wpe_ = add("wpe", std::make_unique<nn::Embedding>(c.P, D_));
    for (int64_t i = 0; i < L_; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".";
      auto b = std::make_unique<Block>(dev);
      b->ln1 = add(p + "ln1", std::make_unique<nn::LayerNorm>(D_));
      b->ln2 = add(p + "ln2", std::make_unique<nn::LayerNorm>(D_));
      b->qkv = add(p + "qkv", std::make_unique<nn::Linear>(D_, 3 * D_));
      b->proj = add(p + "proj", std::make_unique<nn::Linear>(D_, D_));
      b->fc = add(p + "fc", std::make_unique<nn::Linear>(D_, 4 * D_));
      b->fc2 = add(p + "fc2", std::make_unique<nn::Linear>(4 * D_, D_));
      blocks_.push_back(std::move(b));
    }
    ln_ = add("ln", std::make_unique<nn::LayerNorm>(D_));
    // GPT-2's initialization: embeddings and linears N(0, 0.02) with zero biases, the two projections that write
    // into the residual stream (proj, fc2) N(0, 0.02/sqrt(2 layers)), LayerNorms 1 and 0. The tied head then
    // starts with logits of standard deviation near 0.02 sqrt(d), and the first loss near ln(vocab).
    const float std = 0.02f, residual_std = 0.02f / std::sqrt(2.0f * float(L_));
    wte_->init_std = wpe_->init_std = std;
    for (auto& b : blocks_) {
      b->qkv->init_std = b->fc->init_std = std;
      b->proj->init_std = b->fc2->init_std = residual_std;
    }
    finalize(seed);
  }
  std::vector<int64_t> input_shape() const override { return {T_}; }
  bool takes_tokens() const override { return true; }
  int num_classes() const override { return int(V_); }
  int64_t targets_per_sample() const override { return T_; }

  ForwardResult forward(const Input& in, bool) override {
    B_ = in.n;
    const int64_t BT = B_ * T_, D = D_;
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
    ln_out_.ensure(BT * D);
    logits_.ensure(BT * V_);
    probs_.ensure(BT * V_);
    ln_->forward(ln_out_.data(), x, BT);
    // Tied head: logits = ln_out @ wte^T.
    device().linear_forward(logits_.data(), ln_out_.data(), wte_->params(), nullptr, BT, D, V_);
    ForwardResult r;
    r.loss = device().softmax_xent_forward(probs_.data(), logits_.data(), in.y, BT, V_, &r.correct);
    r.predictions = BT;
    return r;
  }

  void backward(nn::BackwardHook* hook, float scale) override {
    const int64_t BT = B_ * T_, D = D_;
    dln_.ensure(BT * D);
    dx_.ensure(BT * D);
    dtmp_.ensure(BT * D);
    // d logits in place of the probabilities (same element, read then written); the forward keeps logits.
    float* dlogits = probs_.data();
    device().softmax_xent_backward(dlogits, probs_.data(), y_, BT, V_, scale / float(BT));
    // The head's weight gradient goes into wte's (accumulated); wte reports once, last.
    device().linear_backward(dln_.data(), wte_->grads(), nullptr, dlogits, ln_out_.data(), wte_->params(), BT, D,
                             V_);
    ln_->backward(dx_.data(), dln_.data(), xl_, BT);
    notify(hook, ln_);
    for (int64_t i = L_ - 1; i >= 0; --i) block_backward(*blocks_[size_t(i)], hook);
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
    for (int64_t i = 0; i < BT; ++i) h[size_t(i)] = int32_t(i % T_);
    pos_.ensure(size_t(BT));
    device().copy_from_host(pos_.data(), h.data(), sizeof(int32_t) * size_t(BT));
    pos_rows_ = BT;
  }

  const float* block_forward(Block& b, const float* x) {
    const int64_t BT = B_ * T_, D = D_;
    b.x = x;
    b.a.ensure(BT * D);
    b.qkvb.ensure(BT * 3 * D);
    b.att.ensure(B_ * NH_ * T_ * T_);
    b.y.ensure(BT * D);
    b.x1.ensure(BT * D);
    b.m.ensure(BT * D);
    b.h.ensure(BT * 4 * D);
    b.g.ensure(BT * 4 * D);
    b.out.ensure(BT * D);
    b.ln1->forward(b.a.data(), x, BT);
    b.qkv->forward(b.qkvb.data(), b.a.data(), BT);
    device().attention_forward(b.y.data(), b.att.data(), b.qkvb.data(), B_, T_, D, NH_);
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
  void block_backward(Block& b, nn::BackwardHook* hook) {
    const int64_t BT = B_ * T_, D = D_;
    dg_.ensure(BT * 4 * D);
    dy_.ensure(BT * D);
    dqkv_.ensure(BT * 3 * D);
    scratch_.ensure(size_t(device().attention_scratch_floats(B_, T_, D, NH_)));
    b.fc2->backward(dg_.data(), dx_.data(), b.g.data(), BT);
    notify(hook, b.fc2);
    device().gelu_backward(dg_.data(), dg_.data(), b.h.data(), BT * 4 * D);
    b.fc->backward(dtmp_.data(), dg_.data(), b.m.data(), BT);
    notify(hook, b.fc);
    b.ln2->backward(dln_.data(), dtmp_.data(), b.x1.data(), BT);  // final now, reported after qkv (index order)
    device().add_inplace(dx_.data(), dln_.data(), BT * D);        // d x1
    b.proj->backward(dy_.data(), dx_.data(), b.y.data(), BT);
    notify(hook, b.proj);
    device().attention_backward(dqkv_.data(), scratch_.data(), dy_.data(), b.qkvb.data(), b.att.data(), B_, T_, D,
                                NH_);
    b.qkv->backward(dtmp_.data(), dqkv_.data(), b.a.data(), BT);
    notify(hook, b.qkv);
    notify(hook, b.ln2);
    b.ln1->backward(dln_.data(), dtmp_.data(), b.x, BT);
    notify(hook, b.ln1);
    device().add_inplace(dx_.data(), dln_.data(), BT * D);  // d x
  }

  int64_t L_, D_, NH_, T_, V_;
  nn::Embedding *wte_, *wpe_;
  nn::LayerNorm* ln_;
  std::vector<std::unique_ptr<Block>> blocks_;
  ops::DeviceArray<int32_t> pos_ = scratch<int32_t>();
  int64_t pos_rows_ = -1;
  Arena x0_ = scratch(), tmp_ = scratch(), ln_out_ = scratch(), logits_ = scratch(), probs_ = scratch();
  Arena dln_ = scratch(), dx_ = scratch(), dtmp_ = scratch(), dg_ = scratch(), dy_ = scratch(), dqkv_ = scratch(),
        scratch_ = scratch();
  const float* xl_ = nullptr;
  const int32_t* tokens_ = nullptr;
  const int32_t* y_ = nullptr;
  int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_gpt2(ModelSpec& spec, uint64_t seed, ops::Device& dev) {
  const Gpt2Config c = parse_config(spec);
  spec.finish();
  return std::make_unique<Gpt2>(spec.text(), c, seed, dev);
}

}  // namespace dd::models
