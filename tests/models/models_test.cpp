// The reference models: parameter counts of CONTRACT.md, dotted layer names, the backward hook contract
// (every layer once, strictly decreasing), and finite-difference checks of the full model's gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/common/error.h"
#include "core/models/model.h"
#include "core/models/model_spec.h"
#include "core/tensor/rng.h"

using namespace dd;

namespace {

struct RecordingHook : nn::BackwardHook {
  std::vector<int> order;
  void on_layer_ready(int i) override { order.push_back(i); }
};

// A small batch of random inputs fitting the model.
struct RandomBatch {
  std::vector<float> x;
  std::vector<int32_t> tok, y;
  models::Input in;
  RandomBatch(models::Model& m, int64_t n, uint64_t seed) {
    Rng r(seed);
    int64_t numel = 1;
    for (auto s : m.input_shape()) numel *= s;
    if (m.takes_tokens()) {
      tok.resize(n * numel);
      for (auto& t : tok) t = int32_t(r.next() % m.num_classes());
    } else {
      x.resize(n * numel);
      for (auto& v : x) v = r.normal();
    }
    y.resize(n * m.targets_per_sample());
    for (auto& t : y) t = int32_t(r.next() % m.num_classes());
    in.n = n;
    in.x = x.empty() ? nullptr : x.data();
    in.tokens = tok.empty() ? nullptr : tok.data();
    in.y = y.data();
  }
};

}  // namespace

TEST(Models, ParameterCountsMatchContract) {
  EXPECT_EQ(models::make_model("mlp", 0)->num_params(), 2913290);
  EXPECT_EQ(models::make_model("cnn", 0)->num_params(), 1701354);
  EXPECT_EQ(models::make_model("resnet20", 0)->num_params(), 272186);
  EXPECT_EQ(models::make_model("gpt-mini", 0)->num_params(), 3323392);
}

TEST(Models, DottedLayerNames) {
  auto names = [](const std::string& m) {
    std::vector<std::string> v;
    auto model = models::make_model(m, 0);
    for (auto* l : model->layers()) v.push_back(l->name);
    return v;
  };
  auto g = names("gpt-mini");
  EXPECT_EQ(g.front(), "wte");
  EXPECT_EQ(g[2], "blocks.0.ln1");
  EXPECT_EQ(g[3], "blocks.0.attn.qkv");
  EXPECT_EQ(g.back(), "head");
  EXPECT_EQ(g.size(), 2u + 4 * 6 + 2);
  auto r = names("resnet20");
  EXPECT_NE(std::find(r.begin(), r.end(), "stage2.1.conv1"), r.end());
  EXPECT_NE(std::find(r.begin(), r.end(), "stage3.0.shortcut.bn"), r.end());
  EXPECT_EQ(std::find(r.begin(), r.end(), "stage1.0.shortcut.conv"), r.end());  // identity shortcut there
  EXPECT_EQ(names("mlp"), (std::vector<std::string>{"fc1", "fc2", "fc3", "fc4"}));
}

TEST(Models, UnknownModelIsUsageError) { EXPECT_ANY_THROW(models::make_model("vgg", 0)); }

TEST(ModelSpec, ParsesOptionsAndRefusesWhatNoFamilyAsked) {
  auto s = models::ModelSpec::parse("gpt2:layers=2,d=64");
  EXPECT_EQ(s.family(), "gpt2");
  EXPECT_EQ(s.get("layers", 12, 1, 96), 2);
  EXPECT_EQ(s.get("heads", 12, 1, 96), 12);  // default
  EXPECT_THROW(s.finish(), dd::UsageError);  // d was never asked for
  EXPECT_EQ(s.get("d", 768, 8, 8192), 64);
  EXPECT_NO_THROW(s.finish());
  auto r = models::ModelSpec::parse("gpt2:layers=0");
  EXPECT_THROW(r.get("layers", 12, 1, 96), dd::UsageError);
  for (const char* bad : {"", ":d=1", "gpt2:", "gpt2:d", "gpt2:d=", "gpt2:=3", "gpt2:d=1,d=2", "gpt2:d=1,"})
    EXPECT_THROW(models::ModelSpec::parse(bad), dd::UsageError) << bad;
  auto x = models::ModelSpec::parse("gpt2:d=12x");
  EXPECT_THROW(x.get("d", 768, 8, 8192), dd::UsageError);
  EXPECT_THROW(models::make_model("mlp:width=3", 0), dd::UsageError);  // fixed models take no options
}

TEST(Models, SameSeedSameParameters) {
  auto a = models::make_model("cnn", 7), b = models::make_model("cnn", 7), c = models::make_model("cnn", 8);
  EXPECT_EQ(0, std::memcmp(a->params().data(), b->params().data(), 4 * a->params().size()));
  EXPECT_NE(0, std::memcmp(a->params().data(), c->params().data(), 4 * a->params().size()));
}

class ModelHook : public ::testing::TestWithParam<std::string> {};

// Every layer reports exactly once, in strictly decreasing index order, and only after its gradient is final:
// zeroing the gradients of a layer right after its hook and re-running must give the same gradients.
TEST_P(ModelHook, EveryLayerOnceInReverseOrder) {
  auto m = models::make_model(GetParam(), 1);
  RandomBatch b(*m, 3, 2);
  m->forward(b.in, true);
  RecordingHook h;
  m->backward(&h);
  ASSERT_EQ(int(h.order.size()), m->num_layers());
  for (int i = 0; i < m->num_layers(); ++i) EXPECT_EQ(h.order[i], m->num_layers() - 1 - i);
}

// When the hook fires for layer l, l's gradient is final: a snapshot taken in the hook equals the end result.
TEST_P(ModelHook, GradientIsFinalWhenHookFires) {
  auto m = models::make_model(GetParam(), 1);
  RandomBatch b(*m, 3, 2);
  struct Snap : nn::BackwardHook {
    models::Model* m;
    std::vector<std::vector<float>> g;
    void on_layer_ready(int i) override {
      auto* l = m->layers()[i];
      g[i].assign(l->grads(), l->grads() + l->num_params());
    }
  } s;
  s.m = m.get();
  s.g.resize(m->num_layers());
  m->forward(b.in, true);
  m->backward(&s);
  for (int i = 0; i < m->num_layers(); ++i) {
    auto* l = m->layers()[i];
    EXPECT_EQ(0, std::memcmp(s.g[i].data(), l->grads(), 4 * l->num_params())) << l->name;
  }
}

// Central differences in float on a few sampled parameters of every layer against the analytic gradient.
TEST_P(ModelHook, FiniteDifferenceGradients) {
  auto m = models::make_model(GetParam(), 3);
  RandomBatch b(*m, m->takes_tokens() ? 1 : 4, 5);  // one 128-token sequence keeps gpt-mini quick
  m->forward(b.in, true);
  m->backward(nullptr);
  std::vector<float> grad(m->grads().data(), m->grads().data() + m->grads().size());
  // BatchNorm running stats move on every training forward; restore them so each probe sees the same state.
  std::vector<float> bufs(m->buffers().data(), m->buffers().data() + m->buffers().size());
  auto loss_at = [&]() {
    if (!bufs.empty()) std::copy(bufs.begin(), bufs.end(), m->buffers().data());
    return double(m->forward(b.in, true).loss);
  };
  Rng r(11);
  // BatchNorm on a 4-sample batch makes the loss strongly curved in the convolution weights, so finite
  // differences of BN models are compared as a whole (direction and size of the sampled gradient vector); the
  // convolution and BatchNorm kernels are checked entry by entry in tests/ops. Smooth models: entry by entry.
  const bool has_bn = m->buffers().size() > 0;
  std::vector<double> ana, num;
  int bad = 0;
  for (auto* l : m->layers()) {
    for (int k = 0; k < 3; ++k) {
      int64_t i = l->param_offset() + int64_t(r.next() % uint64_t(l->num_params()));
      float* p = m->params().data() + i;
      const float orig = *p, h = 1e-3f * std::max(1.0f, std::fabs(orig));
      *p = orig + h;
      double lp = loss_at();
      *p = orig - h;
      double lm = loss_at();
      *p = orig;
      num.push_back((lp - lm) / (2.0 * double(h)));
      ana.push_back(grad[i]);
      if (!has_bn && std::fabs(num.back() - ana.back()) > 2e-3 + 0.1 * std::fabs(ana.back())) {
        ++bad;
        ADD_FAILURE() << l->name << " param " << i << ": analytic " << ana.back() << " numeric " << num.back();
      }
    }
  }
  double dot = 0, na = 0, nn = 0, nd = 0;
  for (size_t i = 0; i < ana.size(); ++i) {
    dot += ana[i] * num[i];
    na += ana[i] * ana[i];
    nn += num[i] * num[i];
    nd += (ana[i] - num[i]) * (ana[i] - num[i]);
  }
  EXPECT_GT(dot / std::sqrt(na * nn), 0.99) << "cosine(analytic, numeric)";
  EXPECT_LT(std::sqrt(nd / na), 0.1) << "relative error of the sampled gradient vector";
  EXPECT_EQ(bad, 0);
}

// The decoders at tiny sizes (ctx 16 keeps them quick): gpt2's tied head and llama's fused q|k|v, gate|up.
INSTANTIATE_TEST_SUITE_P(All, ModelHook,
                         ::testing::Values("mlp", "cnn", "resnet20", "gpt-mini",
                                           "gpt2:layers=1,d=32,heads=2,vocab=300,ctx=16",
                                           "gpt2:layers=2,d=16,heads=2,vocab=256,ctx=8,positions=4",
                                           "llama:layers=1,d=32,heads=2,ffn=64,vocab=300,ctx=16",
                                           "llama:layers=2,d=16,heads=2,ffn=24,vocab=256,ctx=8"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });
