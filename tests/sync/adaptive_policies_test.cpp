// Unit tests of the adaptive policies' decision logic (fixed, threshold, autothreshold, staleness cap, hybrid):
// periods by rule and pattern, one sync per period window, signals fed through on_agreed, caps, and key errors.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/error.h"
#include "core/sync/policies/fixed.h"
#include "core/sync/policies/staleness.h"
#include "core/sync/policies/threshold.h"
#include "core/sync/policy/registry.h"

using namespace dd::sync;

namespace {

std::vector<LayerMeta> metas(const std::vector<std::pair<std::string, std::string>>& name_kind) {
  std::vector<LayerMeta> m;
  int64_t bytes = 1000;
  for (auto& [n, k] : name_kind) m.push_back({n, k, bytes / 4, bytes}), bytes += 1000;
  return m;
}

const auto kMlp = metas({{"fc1", "linear"}, {"fc2", "linear"}, {"fc3", "linear"}, {"fc4", "linear"}});
const auto kCnn = metas({{"conv1", "conv"}, {"bn1", "batchnorm"}, {"conv2", "conv"}, {"bn2", "batchnorm"},
                         {"conv3", "conv"}, {"bn3", "batchnorm"}, {"fc1", "linear"}, {"fc2", "linear"}});
const auto kGpt = metas({{"wte", "embedding"}, {"wpe", "embedding"}, {"h.0.ln1", "layernorm"},
                         {"h.0.attn.qkv", "linear"}, {"h.1.mlp.fc", "linear"}, {"ln_f", "layernorm"},
                         {"head", "linear"}});
const auto kNamed = metas({{"embed.tok", "embedding"}, {"embed.pos", "embedding"}, {"blocks.0.attn", "linear"},
                           {"blocks.0.mlp", "linear"}, {"blocks.1.attn", "linear"}, {"ln_f", "layernorm"},
                           {"head", "linear"}});

std::unique_ptr<Policy> policy(const std::string& spec, const std::vector<LayerMeta>& m, int world = 3) {
  auto p = make_policy(PolicySpec::parse(spec));
  p->setup(m, world);
  return p;
}

std::vector<int> periods(const std::string& spec, const std::vector<LayerMeta>& m) {
  auto p = policy(spec, m);
  auto* f = dynamic_cast<FixedPolicy*>(p.get());
  EXPECT_NE(f, nullptr);
  std::vector<int> k;
  for (size_t l = 0; l < m.size(); ++l) k.push_back(f->period(int(l)));
  return k;
}

// One step as the engine runs it (decide_step): every layer's decision, then the actions reported back.
std::vector<Action> decide_all(Policy& p, int layers, int64_t s) {
  std::vector<Action> a;
  for (int l = 0; l < layers; ++l) a.push_back(p.decide(l, s));
  p.on_actions(s, a);
  return a;
}

// Per layer, the number of sync decisions (anything but None) over `steps` steps.
std::vector<int> count_syncs(Policy& p, int layers, int steps) {
  std::vector<int> n(layers, 0);
  for (int s = 0; s < steps; ++s) {
    const auto a = decide_all(p, layers, s);
    for (int l = 0; l < layers; ++l) n[l] += a[l] != Action::None;
  }
  return n;
}

// Feeds agreed votes (per-rank means cos[l], post-sync cosine after[l]) as the engine would: sums over `world`.
void agree(Policy& p, int64_t step, const std::vector<double>& cos, const std::vector<double>& after, int world) {
  std::vector<float> sums;
  for (size_t l = 0; l < cos.size(); ++l) sums.push_back(float(cos[l] * world)), sums.push_back(float(after[l] * world));
  p.caps().voting->on_agreed(step, sums.data(), world);
}

}  // namespace

TEST(Glob, StarAndQuestionMark) {
  EXPECT_TRUE(glob_match("embed*", "embed.tok"));
  EXPECT_TRUE(glob_match("blocks.*", "blocks.0.attn"));
  EXPECT_TRUE(glob_match("*.attn", "blocks.1.attn"));
  EXPECT_TRUE(glob_match("h.?.mlp*", "h.1.mlp.fc"));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("head", "head"));
  EXPECT_FALSE(glob_match("head", "head2"));
  EXPECT_FALSE(glob_match("blocks.*", "blocks"));
  EXPECT_FALSE(glob_match("*.mlp", "blocks.0.mlp.fc"));
  EXPECT_FALSE(glob_match("h.?.mlp", "h.10.mlp"));
}

TEST(Fixed, PeriodsByRule) {
  EXPECT_EQ(periods("fixed", kMlp), (std::vector<int>{8, 4, 4, 1}));
  EXPECT_EQ(periods("fixed", kCnn), (std::vector<int>{8, 8, 4, 4, 4, 4, 4, 1}));  // conv1 + its bn1 are the input
  EXPECT_EQ(periods("fixed", kGpt), (std::vector<int>{8, 8, 4, 4, 4, 4, 1}));     // embeddings are the input
  EXPECT_EQ(periods("fixed:in=2,mid=3,out=5", kMlp), (std::vector<int>{2, 3, 3, 5}));
}

TEST(Fixed, PeriodsByPatternFirstMatchWins) {
  EXPECT_EQ(periods("fixed:embed*=8,blocks.*=4,head=1", kNamed), (std::vector<int>{8, 8, 4, 4, 4, 4, 1}));
  EXPECT_EQ(periods("fixed:blocks.0.*=2,blocks.*=6,default=3", kNamed), (std::vector<int>{3, 3, 2, 2, 6, 3, 3}));
  // Order matters: the general pattern first shadows the specific one.
  EXPECT_EQ(periods("fixed:blocks.*=6,blocks.0.*=2,default=3", kNamed), (std::vector<int>{3, 3, 6, 6, 6, 3, 3}));
  EXPECT_EQ(periods("fixed:default=2", kNamed), std::vector<int>(7, 2));
}

TEST(Fixed, EachLayerSyncsExactlyOncePerPeriodWindowStaggered) {
  for (auto spec : {"fixed", "fixed:in=3,mid=5,out=2", "fixed:embed*=8,blocks.*=4,head=1"}) {
    const auto& m = std::string(spec).find("embed") != std::string::npos ? kNamed : kGpt;
    auto p = policy(spec, m);
    auto* f = dynamic_cast<FixedPolicy*>(p.get());
    const int steps = 120;  // a multiple of every period used
    std::map<int, std::vector<int>> offsets;  // period -> offsets of its layers
    for (size_t l = 0; l < m.size(); ++l) {
      const int K = f->period(int(l));
      offsets[K].push_back(f->offset(int(l)));
      for (int w = 0; w < steps / K; ++w) {
        int syncs = 0;
        for (int s = w * K; s < (w + 1) * K; ++s) {
          Action a = p->decide(int(l), s);
          EXPECT_EQ(a == Action::AllreduceGrads, K == 1) << spec << " " << m[l].name;
          syncs += a != Action::None;
        }
        EXPECT_EQ(syncs, 1) << spec << " layer " << m[l].name << " window " << w;
      }
    }
    // Layers sharing a period > 1 do not all fire on one step.
    for (auto& [K, offs] : offsets)
      if (K > 1 && offs.size() > 1)
        EXPECT_GT(std::set<int>(offs.begin(), offs.end()).size(), 1u) << spec << " period " << K;
  }
}

TEST(Fixed, PlanPrintsEveryLayersPeriod) {
  auto p = policy("fixed", kMlp);
  EXPECT_NE(p->caps().reporting->plan().find("fc1=8@"), std::string::npos) << p->caps().reporting->plan();
  EXPECT_NE(p->caps().reporting->plan().find("fc4=1"), std::string::npos) << p->caps().reporting->plan();
}

TEST(Fixed, BadSpecsAreUsageErrors) {
  EXPECT_THROW(policy("fixed:embd*=8,head=1", kNamed), dd::UsageError);      // matches no layer
  EXPECT_THROW(policy("fixed:in=0", kMlp), dd::UsageError);
  EXPECT_THROW(policy("fixed:mid=x", kMlp), dd::UsageError);
  EXPECT_THROW(policy("fixed:head=-1", kNamed), dd::UsageError);
  EXPECT_THROW(policy("fixed:in=8,head=1", kNamed), dd::UsageError);         // rule and patterns mixed
  EXPECT_THROW(policy("fixed:head=1,head=2", kNamed), dd::UsageError);       // given twice
  EXPECT_THROW(policy("fixed:head", kNamed), dd::UsageError);                // no period
}

TEST(Threshold, LowSignalSyncsMoreOftenThanHighSignal) {
  const int world = 3, steps = 64;
  auto p = policy("threshold:thr=0.8,min=1,max=16", kMlp, world);
  auto* th = dynamic_cast<ThresholdPolicy*>(p.get());
  std::vector<int> n(4, 0);
  for (int s = 0; s < steps; ++s) {
    if (s > 0) agree(*p, s - 1, {0.3, 0.95, 0.79, 0.81}, {0.3, 0.95, 0.79, 0.81}, world);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) n[l] += a[l] == Action::AverageParams;
  }
  EXPECT_NEAR(th->signal(0), 0.3, 1e-6);
  EXPECT_EQ(n[1], steps / 16);  // above the line: only the max bound
  EXPECT_EQ(n[3], steps / 16);
  EXPECT_EQ(n[0], steps - 2);   // below: every step once the first measured votes are in (step 2 on)
  EXPECT_EQ(n[2], steps - 2);
}

TEST(Threshold, MinBoundsTheSyncRate) {
  auto p = policy("threshold:thr=0.8,min=3,max=10", kMlp);
  std::vector<int> last(4, -1), gaps_min(4, 1 << 30), gaps_max(4, 0);
  for (int s = 0; s < 60; ++s) {
    if (s > 0) agree(*p, s - 1, {0.1, 0.1, 0.9, 0.9}, {0.1, 0.1, 0.9, 0.9}, 3);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l)
      if (a[l] != Action::None) {
        gaps_min[l] = std::min(gaps_min[l], s - last[l]);
        gaps_max[l] = std::max(gaps_max[l], s - last[l]);
        last[l] = s;
      }
  }
  EXPECT_EQ(gaps_min[0], 3);
  EXPECT_EQ(gaps_max[0], 3);
  EXPECT_EQ(gaps_min[2], 10);
  EXPECT_EQ(gaps_max[2], 10);
}

// A layer whose gradient direction breaks right after each averaging (ranks disagreed) syncs more often than
// one with the same steady cosine that averaging does not disturb.
TEST(Threshold, DisruptionAtSyncsLowersTheSignal) {
  auto p = policy("threshold:thr=0.8,min=1,max=8", kMlp);
  auto* th = dynamic_cast<ThresholdPolicy*>(p.get());
  std::vector<int> n(4, 0);
  for (int s = 0; s < 64; ++s) {
    if (s > 0) agree(*p, s - 1, {0.9, 0.9, 0.9, 0.9}, {0.1, 0.9, 0.9, 0.9}, 3);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) n[l] += a[l] != Action::None;
  }
  EXPECT_GT(th->disruption(0), 0.3);
  EXPECT_EQ(th->disruption(1), 0.0);
  EXPECT_LT(th->signal(0), 0.8);
  EXPECT_EQ(n[1], 8);
  EXPECT_GT(n[0], 40);
}

// auto=1: the line follows each layer's own usual direction change and its spread, so a layer syncs when its
// cosine dips below its usual range, not when it sits at a (low) level that is normal for it.
TEST(Threshold, AutoLineAdaptsToEachLayersUsualLevel) {
  auto p = policy("autothreshold:z=2,min=1,max=1000", kMlp);
  auto* th = dynamic_cast<ThresholdPolicy*>(p.get());
  std::vector<int> steady(4, 0), dipped(4, 0);
  const double wiggle[3] = {0, 0.05, -0.05};  // the usual fluctuation: std 0.041
  for (int s = 0; s < 120; ++s) {
    const bool dip = s >= 80;
    if (s > 0) {
      const double w = wiggle[(s - 1) % 3];
      agree(*p, s - 1, {0.2 + w, (dip ? 0.0 : 0.2) + w, 0.9 + w, (dip ? 0.6 : 0.9) + w}, {0, 0, 0, 0}, 3);
    }
    if (s == 79) EXPECT_NEAR(th->line(0), 0.2 - 2 * 0.0408, 0.01);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) {
      const bool synced = a[l] != Action::None;
      if (s >= 40 && !dip) steady[l] += synced;
      if (dip) dipped[l] += synced;
    }
  }
  EXPECT_EQ(steady, std::vector<int>(4, 0));  // within their usual range: no trigger, whatever the level
  EXPECT_EQ(dipped[0], 0);
  EXPECT_EQ(dipped[2], 0);
  EXPECT_GT(dipped[1], 5);  // below their usual range
  EXPECT_GT(dipped[3], 5);
}

TEST(Threshold, BadSpecsAreUsageErrors) {
  EXPECT_THROW(policy("threshold:thr=2", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:min=5,max=2", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:auto=1,thr=0.5", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:z=0.5", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:t=3", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:foo=1", kMlp), dd::UsageError);
  EXPECT_THROW(policy("threshold:ema=1.5", kMlp), dd::UsageError);
  EXPECT_THROW(policy("hybrid:t=0", kMlp), dd::UsageError);
}

TEST(Staleness, AloneIsPeriodT) {
  auto p = policy("staleness:t=3", kMlp);
  for (int s = 0; s < 30; ++s) {
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(a[l] != Action::None, s % 3 == 2) << "step " << s;
  }
  EXPECT_EQ(p->describe(), "staleness:t=3");
}

TEST(Staleness, CapsAnyInnerPolicy) {
  auto p = policy("localsgd:k=100+staleness:t=3", kMlp);
  EXPECT_EQ(p->describe(), "localsgd:k=100+staleness:t=3");
  std::vector<int> last(4, -1);
  for (int s = 0; s < 50; ++s) {
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l)
      if (a[l] != Action::None) {
        EXPECT_EQ(s - last[l], 3);
        last[l] = s;
      }
  }
  EXPECT_EQ(last[0], 47);
  // The inner schedule is kept where it syncs anyway: plsgd's group syncs reset the counter.
  auto q = policy("plsgd:h=2+staleness:t=4", kMlp);
  EXPECT_EQ(count_syncs(*q, 4, 40), std::vector<int>(4, 20));
  // The inner whole-model average (localsgd k=2, after steps 1, 3, ...) counts as a sync: the cap never fires.
  auto r = policy("localsgd:k=2+staleness:t=3", kMlp);
  EXPECT_EQ(count_syncs(*r, 4, 40), std::vector<int>(4, 0));
  EXPECT_TRUE(r->full_average_after(1));
  // Order does not matter; dreamddp's profiling request passes through.
  auto d = make_policy(PolicySpec::parse("staleness:t=4+dreamddp:h=8"));
  EXPECT_EQ(d->describe(), "dreamddp:h=8+staleness:t=4");
  EXPECT_GT(d->observe_window(), 0);
  EXPECT_GT(make_policy(PolicySpec::parse("staleness:t=4+dreamddp:h=8,lockstep=1"))->profile_window(), 0);
}

TEST(Staleness, BadCompositionsAreUsageErrors) {
  EXPECT_THROW(make_policy(PolicySpec::parse("ddp+plsgd:h=2")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("staleness:t=2+staleness:t=3")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("ddp+staleness:x=1")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("ddp+staleness:t=0")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("ddp+")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("nosuch+staleness:t=2")), dd::UsageError);
}

TEST(Hybrid, CapOrThresholdWhicheverFiresFirst) {
  auto p = policy("hybrid:t=4,thr=0.5,min=1", kMlp);
  EXPECT_EQ(p->describe().rfind("hybrid:t=4,thr=0.5,", 0), 0u) << p->describe();
  EXPECT_EQ(p->caps().voting->votes_per_layer(), 2);
  std::vector<int> n(4, 0);
  for (int s = 0; s < 40; ++s) {
    if (s > 0) agree(*p, s - 1, {0.2, 0.9, 0.2, 0.9}, {0.2, 0.9, 0.2, 0.9}, 3);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) n[l] += a[l] != Action::None;
  }
  EXPECT_EQ(n[1], 10);  // the cap: every 4 steps
  EXPECT_EQ(n[0], 38);  // the threshold: every step from step 2 on
}

// The cap's forced syncs are syncs for the threshold too: the cosine right after them is measured, so a layer
// that averaging disturbs (ranks disagree) starts syncing on its own.
TEST(Hybrid, CapSyncsFeedTheDisruptionMeasurement) {
  auto p = policy("hybrid:t=4,thr=0.5,min=1", kMlp);
  auto* th = dynamic_cast<ThresholdPolicy*>(dynamic_cast<StalenessCap*>(p.get())->inner());
  ASSERT_NE(th, nullptr);
  std::vector<int> n(4, 0);
  for (int s = 0; s < 40; ++s) {
    if (s > 0) agree(*p, s - 1, {0.9, 0.9, 0.9, 0.9}, {0.0, 0.9, 0.9, 0.9}, 3);
    const auto a = decide_all(*p, 4, s);
    for (int l = 0; l < 4; ++l) n[l] += a[l] != Action::None;
  }
  EXPECT_GT(th->disruption(0), 0.4);
  EXPECT_EQ(n[1], 10);
  EXPECT_GT(n[0], 30);
}

TEST(Hybrid, DefaultsToTheAutoLineUnlessThrIsGiven) {
  EXPECT_EQ(policy("hybrid", kMlp)->describe(), "hybrid:t=8,auto=1,z=1,slow=0.99,ema=0.9,aema=0.5,min=4,max=16");
  EXPECT_EQ(policy("hybrid:thr=0.2", kMlp)->describe(), "hybrid:t=8,thr=0.2,ema=0.9,aema=0.5,min=4,max=16");
  EXPECT_EQ(policy("threshold", kMlp)->describe(), "threshold:thr=0.1,ema=0.9,aema=0.5,min=4,max=16");
}
