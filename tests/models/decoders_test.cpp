// gpt2 and llama (docs/models.md): parameter counts in closed form (the numbers the PyTorch peer prints for the
// same specs), layer names and order as the peer's parameter-owning modules, GPT-2's per-layer bytes against
// app/sim/gpt2_bytes.json (the artifact's GPT-2 small), the tied head, option errors, and GPT-2's initialization.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/models/model.h"
#include "core/tensor/rng.h"

using namespace dd;

namespace {

// GPT-2: wte V*D, wpe max(P,T)*D, per block 2 LayerNorms (4D), qkv 3D*D+3D, proj D*D+D, fc 4D*D+4D,
// fc2 4D*D+D, final LN 2D; the head is wte (tied).
int64_t gpt2_params(int64_t L, int64_t D, int64_t V, int64_t P, int64_t T) {
  return V * D + std::max(P, T) * D + L * (12 * D * D + 13 * D) + 2 * D;
}
// Llama: embed V*D, per block 2 RMSNorms (2D), q/k/v/o 4D*D, gate/up/down 3*D*F, final norm D, head V*D.
int64_t llama_params(int64_t L, int64_t D, int64_t F, int64_t V) {
  return 2 * V * D + L * (2 * D + 4 * D * D + 3 * D * F) + D;
}

std::vector<std::string> names_of(const models::Model& m) {
  std::vector<std::string> v;
  for (auto* l : m.layers()) v.push_back(l->name);
  return v;
}

}  // namespace

// The small settings, with the counts the peer printed for them (torch_ddp.py --model SPEC, 2026-12-02).
TEST(Decoders, ParameterCountsSmallSettings) {
  struct Case { const char* spec; int64_t peer, closed; };
  const Case cases[] = {
      {"gpt2:layers=1,d=32,heads=2,vocab=300", 55136, gpt2_params(1, 32, 300, 1024, 128)},
      {"gpt2:layers=2,d=64,heads=2,vocab=300,ctx=16,positions=8", 0, gpt2_params(2, 64, 300, 8, 16)},
      {"gpt2:layers=6,d=256,heads=4,ctx=64,vocab=2000,positions=512", 0, gpt2_params(6, 256, 2000, 512, 64)},
      {"llama:layers=1,d=32,heads=2,ffn=64,vocab=300", 29536, llama_params(1, 32, 64, 300)},
      {"llama:layers=3,d=48,heads=4,ffn=100,vocab=1000", 0, llama_params(3, 48, 100, 1000)},
  };
  for (const auto& c : cases) {
    auto m = models::make_model(c.spec, 0);
    EXPECT_EQ(m->num_params(), c.closed) << c.spec;
    if (c.peer) EXPECT_EQ(m->num_params(), c.peer) << c.spec;
    EXPECT_EQ(m->name(), c.spec);
  }
}

// The presets (the paper's shapes): one build each, shared by the count, name and byte checks.
TEST(Decoders, Gpt2PresetCountNamesAndArtifactBytes) {
  auto m = models::make_model("gpt2", 0);
  EXPECT_EQ(m->num_params(), 124439808);
  EXPECT_EQ(m->num_params(), gpt2_params(12, 768, 50257, 1024, 128));
  EXPECT_EQ(m->input_shape(), std::vector<int64_t>{128});
  EXPECT_EQ(m->num_classes(), 50257);
  // The peer's modules (76 with the tied head, which owns wte's weight there): here 75, the head is no layer.
  const auto n = names_of(*m);
  ASSERT_EQ(n.size(), 2u + 12 * 6 + 1);
  EXPECT_EQ(n[0], "wte");
  EXPECT_EQ(n[1], "wpe");
  const std::vector<std::string> blk{"ln1", "ln2", "qkv", "proj", "fc", "fc2"};
  for (int b = 0; b < 12; ++b)
    for (size_t j = 0; j < blk.size(); ++j) EXPECT_EQ(n[2 + 6 * b + j], "blocks." + std::to_string(b) + "." + blk[j]);
  EXPECT_EQ(n.back(), "ln");
  EXPECT_EQ(m->layers()[0]->num_params(), 50257 * 768) << "wte holds the tied head's weight once";

  // Bytes per layer equal the artifact's GPT-2 small (Hugging Face names; its zero-byte dropout/activation
  // entries own nothing), layer for layer, except lm_head: tied here, so it is wte's and not a layer.
  std::ifstream f(std::string(DD_SOURCE_DIR) + "/app/sim/gpt2_bytes.json");
  ASSERT_TRUE(f) << "app/sim/gpt2_bytes.json";
  const auto art = nlohmann::json::parse(f);
  const std::map<std::string, std::string> hf_block{{"ln1", "ln_1"}, {"ln2", "ln_2"}, {"qkv", "attn.c_attn"},
                                                    {"proj", "attn.c_proj"}, {"fc", "mlp.c_fc"},
                                                    {"fc2", "mlp.c_proj"}};
  auto hf_name = [&](const std::string& ours) -> std::string {
    if (ours == "wte" || ours == "wpe") return "transformer." + ours;
    if (ours == "ln") return "transformer.ln_f";
    const size_t dot = ours.find('.', 7);  // blocks.<i>.<layer>
    return "transformer.h." + ours.substr(7, dot - 7) + "." + hf_block.at(ours.substr(dot + 1));
  };
  size_t nonzero = 0;
  for (auto& [k, v] : art.items()) nonzero += v.get<int64_t>() > 0;
  EXPECT_EQ(nonzero, m->layers().size() + 1) << "every non-empty artifact layer but lm_head is one of ours";
  EXPECT_EQ(art.at("lm_head").get<int64_t>(), art.at("transformer.wte").get<int64_t>());
  for (auto* l : m->layers()) {
    const std::string h = hf_name(l->name);
    ASSERT_TRUE(art.contains(h)) << l->name << " -> " << h;
    EXPECT_EQ(4 * (l->num_params() + l->num_buffers()), art.at(h).get<int64_t>()) << l->name << " vs " << h;
  }
}

TEST(Decoders, LlamaPresetCountAndNames) {
  auto m = models::make_model("llama", 0);
  EXPECT_EQ(m->num_params(), 134105856);
  EXPECT_EQ(m->num_params(), llama_params(12, 768, 2048, 32000));
  EXPECT_EQ(m->num_classes(), 32000);
  const auto n = names_of(*m);
  ASSERT_EQ(n.size(), 1u + 12 * 9 + 2);  // the peer's 111 modules
  EXPECT_EQ(n[0], "embed");
  const std::vector<std::string> blk{"n1", "n2", "q", "k", "v", "o", "gate", "up", "down"};
  for (int b = 0; b < 12; ++b)
    for (size_t j = 0; j < blk.size(); ++j) EXPECT_EQ(n[1 + 9 * b + j], "blocks." + std::to_string(b) + "." + blk[j]);
  EXPECT_EQ(n[n.size() - 2], "norm");
  EXPECT_EQ(n.back(), "head");
  EXPECT_EQ(m->layers().back()->num_params(), 32000 * 768) << "untied head";
  EXPECT_STREQ(m->layers()[1]->kind(), "rmsnorm");
  EXPECT_EQ(m->layers()[1]->num_params(), 768) << "RMSNorm: weight only";
}

TEST(Decoders, BadOptionsAreUsageErrors) {
  for (const char* bad : {"gpt2:d=100,heads=12", "gpt2:vocab=100", "gpt2:ffn=8", "gpt2:layers=0", "llama:d=36,heads=4",
                          "llama:positions=4", "llama:heads=0", "llama:d=30,heads=4"})
    EXPECT_THROW(models::make_model(bad, 0), dd::UsageError) << bad;
}

// positions < ctx: the peer gives wpe ctx rows; so do we.
TEST(Decoders, Gpt2PositionsAtLeastContext) {
  auto m = models::make_model("gpt2:layers=1,d=8,heads=2,ctx=16,positions=8,vocab=256", 0);
  EXPECT_EQ(m->layers()[1]->name, "wpe");
  EXPECT_EQ(m->layers()[1]->num_params(), 16 * 8);
}

// Relative deviation of the sample standard deviation of the first n values of p from sigma (mean taken as 0).
static double std_error(const float* p, int64_t n, double sigma) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(p[i]) * p[i];
  return std::abs(std::sqrt(ss / double(n)) / sigma - 1);
}

// GPT-2's initialization (docs/models.md): embeddings and linears N(0, 0.02), the residual projections proj and
// fc2 N(0, 0.02/sqrt(2 layers)), zero biases; so the untrained loss on uniform random targets starts near
// ln(vocab). The logits' standard deviation is about 0.02 sqrt(d) (0.55 at d=768), which adds about its square
// over 2 (0.15) to ln(vocab) = 10.8: within 5%. Under N(0, 1) embeddings the first loss was near 500.
TEST(Decoders, Gpt2StartsNearLnVocab) {
  for (const char* spec : {"gpt2:ctx=32", "gpt2:layers=2,d=64,heads=2,ctx=16,vocab=2000"}) {
    auto m = models::make_model(spec, 3);
    const int64_t V = m->num_classes(), T = m->input_shape()[0], B = 2;
    Rng rng(11);
    std::vector<int32_t> tok(size_t(B * T)), y(size_t(B * T));
    for (auto& t : tok) t = int32_t(rng.next() % uint64_t(V));
    for (auto& t : y) t = int32_t(rng.next() % uint64_t(V));
    models::Input in;
    in.n = B;
    in.tokens = tok.data();
    in.y = y.data();
    const float loss = m->forward(in, true).loss;
    EXPECT_NEAR(loss / std::log(double(V)), 1.0, 0.05)
        << spec << ": loss " << loss << ", ln(vocab) " << std::log(double(V));
    // The sample standard deviation of n normals is within 5/sqrt(2n) of sigma (relative) but for 1 in 3.5 million.
    const auto& ls = m->layers();
    const int64_t layers = (int64_t(ls.size()) - 3) / 6;
    for (const auto* l : ls) {
      const std::string& n = l->name;
      const bool residual = n.size() > 5 && (n.substr(n.size() - 5) == ".proj" || n.substr(n.size() - 4) == ".fc2");
      const bool linear = std::string(l->kind()) == "linear", embedding = std::string(l->kind()) == "embedding";
      if (!linear && !embedding) continue;
      const int64_t w = embedding ? l->num_params() : l->param_specs()[0].numel();
      const double sigma = residual ? 0.02 / std::sqrt(2.0 * double(layers)) : 0.02;
      EXPECT_LE(std_error(l->params(), w, sigma), 5 / std::sqrt(2.0 * double(w))) << spec << " " << n;
      for (int64_t i = w; i < l->num_params(); ++i) ASSERT_EQ(l->params()[i], 0.0f) << spec << " " << n << " bias";
    }
  }
}
