// llama[:layers=12,d=768,heads=12,ffn=2048,ctx=128,vocab=32000] (docs/models.md): a Llama-architecture decoder.
// RMSNorm (eps 1e-5, weight only) before attention and MLP, q/k/v/o without bias, RoPE on q and k (base 10000,
// pairs 2i/2i+1 of each head), SwiGLU MLP down(silu(gate(x)) * up(x)), final RMSNorm, untied head, no biases.
// Layers in the order and under the names of the PyTorch peer's parameter-owning modules: embed,
// blocks.i.{n1, n2, q, k, v, o, gate, up, down}, norm, head. q, k and v are adjacent in the arena, so their weights
// form one [3d, d] matrix and run as one GEMM (gate and up likewise, one [2 ffn, d] matrix); the hook reports each
// layer in strictly decreasing index order (n2 after q).
#include <cmath>

#include "base/error.h"
#include "core/models/model_spec.h"
#include "core/models/zoo.h"
#include "core/nn/layers.h"

namespace dd::models {
namespace {

struct LlamaConfig {
  int64_t L, D, NH, F, T, V;
};

LlamaConfig parse_config(ModelSpec& s) {
  LlamaConfig c;
  c.L = s.get("layers", 12, 1, 1024);
  c.D = s.get("d", 768, 2, 1 << 16);
  c.NH = s.get("heads", 12, 1, 1 << 12);
  c.F = s.get("ffn", 2048, 1, 1 << 20);
  c.T = s.get("ctx", 128, 1, 1 << 16);
  c.V = s.get("vocab", 32000, 256, 1 << 24);  // tokens of every dataset are bytes (< 256) or below the vocab
  if (c.D % c.NH != 0 || (c.D / c.NH) % 2 != 0)
    throw UsageError("model '" + s.text() + "': d=" + std::to_string(c.D) + " must be heads=" + std::to_string(c.NH) +
                     " times an even head size (RoPE rotates pairs)");
  return c;
}

struct Block {
  explicit Block(ops::Device& d) : dev(d) {}
  ops::Device& dev;
  nn::RMSNorm *n1, *n2;
  nn::Linear *q, *k, *v, *o, *gate, *up, *down;
  const float* x = nullptr;  // residual stream in
  Arena a{dev}, qkvb{dev}, att{dev}, y{dev}, x1{dev}, m{dev}, gu{dev}, h{dev}, out{dev};
};

class Llama : public Model {
 public:
  Llama(const std::string& spec, const LlamaConfig& c, uint64_t seed, ops::Device& dev)
      : Model(dev), L_(c.L), D_(c.D), NH_(c.NH), F_(c.F), T_(c.T), V_(c.V) {
    name_ = spec;
    embed_ = add("embed", std::make_unique<nn::Embedding>(V_, D_));
    for (int64_t i = 0; i < L_; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".";
      auto b = std::make_unique<Block>(dev);
      b->n1 = add(p + "n1", std::make_unique<nn::RMSNorm>(D_));
      b->n2 = add(p + "n2", std::make_unique<nn::RMSNorm>(D_));
      b->q = add(p + "q", std::make_unique<nn::Linear>(D_, D_, false));
      b->k = add(p + "k", std::make_unique<nn::Linear>(D_, D_, false));
      b->v = add(p + "v", std::make_unique<nn::Linear>(D_, D_, false));
      b->o = add(p + "o", std::make_unique<nn::Linear>(D_, D_, false));
      b->gate = add(p + "gate", std::make_unique<nn::Linear>(D_, F_, false));
      b->up = add(p + "up", std::make_unique<nn::Linear>(D_, F_, false));
      b->down = add(p + "down", std::make_unique<nn::Linear>(F_, D_, false));
      blocks_.push_back(std::move(b));
    }
    norm_ = add("norm", std::make_unique<nn::RMSNorm>(D_));
    head_ = add("head", std::make_unique<nn::Linear>(D_, V_, false));
    finalize(seed);
    for (auto& b : blocks_)  // the fused GEMMs rely on the arena layout (layers bound in index order)
      DD_CHECK(b->k->weight() == b->q->weight() + D_ * D_ && b->v->weight() == b->k->weight() + D_ * D_ &&
                   b->up->weight() == b->gate->weight() + F_ * D_,
               "llama: q/k/v or gate/up weights are not adjacent in the arena");
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
    x0_.ensure(BT * D);
    embed_->forward(x0_.data(), in.tokens, BT);
    const float* x = x0_.data();
    for (auto& b : blocks_) x = block_forward(*b, x);
    xl_ = x;
    norm_out_.ensure(BT * D);
    logits_.ensure(BT * V_);
    probs_.ensure(BT * V_);
    norm_->forward(norm_out_.data(), x, BT);
    head_->forward(logits_.data(), norm_out_.data(), BT);
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
    float* dlogits = probs_.data();  // in place: each element read, then written
    device().softmax_xent_backward(dlogits, probs_.data(), y_, BT, V_, scale / float(BT));
    head_->backward(dln_.data(), dlogits, norm_out_.data(), BT);
    notify(hook, head_);
    norm_->backward(dx_.data(), dln_.data(), xl_, BT);
    notify(hook, norm_);
    for (int64_t i = L_ - 1; i >= 0; --i) block_backward(*blocks_[size_t(i)], hook);
    embed_->backward(dx_.data(), tokens_, BT);
    notify(hook, embed_);
  }

 private:
  const float* block_forward(Block& b, const float* x) {
    const int64_t BT = B_ * T_, D = D_, hd = D_ / NH_;
    b.x = x;
    b.a.ensure(BT * D);
    b.qkvb.ensure(BT * 3 * D);
    b.att.ensure(B_ * NH_ * T_ * T_);
    b.y.ensure(BT * D);
    b.x1.ensure(BT * D);
    b.m.ensure(BT * D);
    b.gu.ensure(BT * 2 * F_);
    b.h.ensure(BT * F_);
    b.out.ensure(BT * D);
    b.n1->forward(b.a.data(), x, BT);
    device().linear_forward(b.qkvb.data(), b.a.data(), b.q->weight(), nullptr, BT, D, 3 * D);  // q | k | v
    device().rope_forward(b.qkvb.data(), B_, T_, 2 * NH_, hd, 3 * D);  // q's and k's heads, side by side
    device().attention_forward(b.y.data(), b.att.data(), b.qkvb.data(), B_, T_, D, NH_);
    b.o->forward(b.x1.data(), b.y.data(), BT);
    device().add_inplace(b.x1.data(), x, BT * D);
    b.n2->forward(b.m.data(), b.x1.data(), BT);
    device().linear_forward(b.gu.data(), b.m.data(), b.gate->weight(), nullptr, BT, D, 2 * F_);  // gate | up
    device().swiglu_forward(b.h.data(), b.gu.data(), BT, F_);
    b.down->forward(b.out.data(), b.h.data(), BT);
    device().add_inplace(b.out.data(), b.x1.data(), BT * D);
    return b.out.data();
  }

  // dx_ holds d(block output) on entry and d(block input) on exit.
  void block_backward(Block& b, nn::BackwardHook* hook) {
    const int64_t BT = B_ * T_, D = D_, hd = D_ / NH_;
    dh_.ensure(BT * F_);
    dgu_.ensure(BT * 2 * F_);
    dy_.ensure(BT * D);
    dqkv_.ensure(BT * 3 * D);
    scratch_.ensure(size_t(device().attention_scratch_floats(B_, T_, D, NH_)));
    b.down->backward(dh_.data(), dx_.data(), b.h.data(), BT);
    notify(hook, b.down);
    device().swiglu_backward(dgu_.data(), dh_.data(), b.gu.data(), BT, F_);
    device().linear_backward(dtmp_.data(), b.gate->dweight(), nullptr, dgu_.data(), b.m.data(), b.gate->weight(), BT,
                             D, 2 * F_);
    notify(hook, b.up);
    notify(hook, b.gate);
    b.n2->backward(dln_.data(), dtmp_.data(), b.x1.data(), BT);  // final now, reported after q (index order)
    device().add_inplace(dx_.data(), dln_.data(), BT * D);       // d x1
    b.o->backward(dy_.data(), dx_.data(), b.y.data(), BT);
    notify(hook, b.o);
    device().attention_backward(dqkv_.data(), scratch_.data(), dy_.data(), b.qkvb.data(), b.att.data(), B_, T_, D,
                                NH_);
    device().rope_backward(dqkv_.data(), B_, T_, 2 * NH_, hd, 3 * D);
    device().linear_backward(dtmp_.data(), b.q->dweight(), nullptr, dqkv_.data(), b.a.data(), b.q->weight(), BT, D,
                             3 * D);
    notify(hook, b.v);
    notify(hook, b.k);
    notify(hook, b.q);
    notify(hook, b.n2);
    b.n1->backward(dln_.data(), dtmp_.data(), b.x, BT);
    notify(hook, b.n1);
    device().add_inplace(dx_.data(), dln_.data(), BT * D);  // d x
  }

  int64_t L_, D_, NH_, F_, T_, V_;
  nn::Embedding* embed_;
  nn::RMSNorm* norm_;
  nn::Linear* head_;
  std::vector<std::unique_ptr<Block>> blocks_;
  Arena x0_ = scratch(), norm_out_ = scratch(), logits_ = scratch(), probs_ = scratch();
  Arena dln_ = scratch(), dx_ = scratch(), dtmp_ = scratch(), dh_ = scratch(), dgu_ = scratch(), dy_ = scratch(),
        dqkv_ = scratch(), scratch_ = scratch();
  const float* xl_ = nullptr;
  const int32_t* tokens_ = nullptr;
  const int32_t* y_ = nullptr;
  int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_llama(ModelSpec& spec, uint64_t seed, ops::Device& dev) {
  const LlamaConfig c = parse_config(spec);
  spec.finish();
  return std::make_unique<Llama>(spec.text(), c, seed, dev);
}

}  // namespace dd::models
