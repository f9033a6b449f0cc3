// A switch into every registered policy at a step past 0 (by --switch and by the control file), on 2 ranks over
// Gloo: the run trains to its end and the ranks hold the same model bit for bit. A policy that profiles or measures
// during its first steps (dreamddp, hier) counts that window from the step it came into force, not from step 0.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/policy/registry.h"
#include "tests/sync/ranks_harness.h"

using namespace dd;
using namespace dd::testing_harness;

namespace {

// One spec per registered policy, sized for a few dozen tiny steps on 2 ranks of one host. A policy registered
// without an entry here fails CoversEveryRegisteredPolicy: a new policy is tested by switching into it too.
const std::map<std::string, std::string>& spec_of() {
  static const std::map<std::string, std::string> m = {
      {"ddp", "ddp"},
      {"localsgd", "localsgd:k=3"},
      {"plsgd", "plsgd:h=3"},
      {"dreamddp", "dreamddp:h=4"},  // self-profiling, its default 6-step window (the crash of a switch at 60)
      {"fixed", "fixed"},
      {"threshold", "threshold"},
      {"autothreshold", "autothreshold"},
      {"staleness", "staleness:t=3"},
      {"hybrid", "hybrid:t=4"},
      {"hier", "hier:nodes=1x2,profile_steps=3,intra=1,inter=3,slow=2"},
  };
  return m;
}

TEST(SwitchInto, CoversEveryRegisteredPolicy) {
  for (auto& n : sync::registered_policies()) EXPECT_TRUE(spec_of().count(n)) << "no switch case for policy " << n;
}

constexpr int kSteps = 40;       // dreamddp: 6 profiling steps, a period, the 4-period trial, and more
constexpr int kSwitchAt = 10;    // past every policy's own first-steps window counted from step 0
constexpr int kWorld = 2;

struct Outcome {
  std::vector<std::vector<float>> params;  // per rank, after finalize()
  int64_t bytes = 0;                       // rank 0's payload bytes over the run
};

// `from` until the switch, then `to`: by --switch at kSwitchAt, or (control_file) written by rank 0 before step
// kSwitchAt, read there (its poll runs every 10th step) and agreed, so every rank switches at kSwitchAt + 1.
Outcome run(const std::string& from, const std::string& to, bool control_file) {
  ops::set_threads(1);
  auto proto = models::make_model("mlp", 3);
  const std::string dir = std::filesystem::temp_directory_path() / ("dd_switch_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string ctl = dir + "/control";
  std::filesystem::remove(ctl);
  Outcome out;
  out.params.resize(kWorld);
  run_ranks(kWorld, [&](int r, Backend& be) {
    auto m = models::make_model("mlp", 3);
    RankData data(*m, 64, 100 + uint64_t(r));
    optim::Optimizer opt({}, *m);
    auto o = engine_options(from);
    o.check_collectives = true;
    if (!to.empty() && !control_file) o.switches = sync::parse_switches({std::to_string(kSwitchAt) + ":" + to});
    if (!to.empty() && control_file) o.control_file = ctl;
    auto e = sync::make_layer_sync(o, *m, opt, be);
    for (int s = 0; s < kSteps; ++s) {
      if (r == 0 && control_file && !to.empty() && s == kSwitchAt) std::ofstream(ctl) << to << "\n";
      engine_step(*m, opt, e->step, data.batch(int64_t(s) * 4, 4), s, 0.05f);
      if (r == 0) out.bytes += e->probe.step_stats().bytes;
    }
    e->control.finalize();
    out.params[size_t(r)] = snapshot(*m);
  });
  std::filesystem::remove_all(dir);
  return out;
}

struct Case {
  std::string from, to;
  bool control_file;
};

class SwitchInto : public ::testing::TestWithParam<Case> {};

TEST_P(SwitchInto, TrainsToTheEndWithRanksBitwiseEqual) {
  const auto& c = GetParam();
  static std::map<std::string, Outcome> bases;  // the old policy alone, once per old policy
  if (!bases.count(c.from)) bases[c.from] = run(c.from, "", false);
  const Outcome& base = bases[c.from];
  const Outcome got = run(c.from, c.to, c.control_file);
  ASSERT_EQ(got.params[0].size(), got.params[1].size());
  EXPECT_EQ(0, std::memcmp(got.params[0].data(), got.params[1].data(), 4 * got.params[0].size()))
      << "ranks differ after switching from " << c.from << " to " << c.to;
  // The switch took effect: the new policy moved other bytes than the old one alone would have.
  EXPECT_NE(got.bytes, base.bytes) << c.from << " -> " << c.to << " moved exactly what " << c.from << " alone did";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (auto& [name, spec] : spec_of())
    for (const char* from : {"ddp", "localsgd:k=8"})
      for (bool cf : {false, true})
        if (spec != from) v.push_back({from, spec, cf});
  // A composite forwards the first step to the policy it wraps.
  v.push_back({"ddp", "dreamddp:h=4+staleness:t=2", false});
  v.push_back({"localsgd:k=8", "dreamddp:h=2,profile_steps=3,delay=1", true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Policies, SwitchInto, ::testing::ValuesIn(cases()), [](const auto& i) {
  std::string s = i.param.from + "_to_" + i.param.to + (i.param.control_file ? "_by_control_file" : "_by_switch");
  std::string out;
  for (char ch : s) out += std::isalnum(uint8_t(ch)) ? ch : '_';
  return out;
});

}  // namespace
