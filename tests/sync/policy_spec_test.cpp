// Policy specs: parsing, key checks, the baseline policies' decisions, and the capabilities each policy takes on.
#include <gtest/gtest.h>

#include <stdexcept>

#include "base/error.h"
#include "core/sync/policies/staleness.h"
#include "core/sync/policy/closing_period.h"
#include "core/sync/policy/registry.h"
#include "core/sync/policy/timed_window.h"
#include "core/sync/profile/profile_io.h"
#include "core/sync/schedule/schedule_model.h"
#include "core/sync/schedule/schedule_solver.h"

using namespace dd::sync;

TEST(PolicySpec, ParsesKeyValues) {
  auto s = PolicySpec::parse("dreamddp:h=8,fillin=1");
  EXPECT_EQ(s.name, "dreamddp");
  EXPECT_EQ(s.get_int("h", 0, 1, 100), 8);
  EXPECT_TRUE(s.get_bool("fillin", false));
}

TEST(PolicySpec, BadSpecsAreUsageErrors) {
  for (const char* bad : {"", ":h=1", "localsgd:k", "localsgd:k=", "localsgd:=3", "localsgd:k=1,,", "localsgd:k=1,k=2"})
    EXPECT_THROW(PolicySpec::parse(bad), dd::UsageError) << bad;
  EXPECT_THROW(make_policy(PolicySpec::parse("nosuch")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("localsgd:q=1")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("localsgd:k=0")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("plsgd:h=x")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("ddp:k=1")), dd::UsageError);
  EXPECT_THROW(make_policy(PolicySpec::parse("dreamddp:profile=/nonexistent")), dd::UsageError);
}

// Parsed in the unit tests so ASan sees it too (the STEP parser once read a destroyed temporary).
TEST(PolicySpec, SwitchesParseSortAndRefuseBadSteps) {
  auto sw = parse_switches({"20:localsgd:k=2", "5:ddp"});
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0].step, 5);
  EXPECT_EQ(sw[0].spec.text, "ddp");
  EXPECT_EQ(sw[1].step, 20);
  EXPECT_EQ(sw[1].spec.text, "localsgd:k=2");
  for (const char* bad : {"ddp", ":ddp", "x:ddp", "-1:ddp", "5x:ddp", "99999999999999999999:ddp", "5:nosuch"})
    EXPECT_THROW(parse_switches({bad}), dd::UsageError) << bad;
}

TEST(PolicySpec, HierNodes) {
  EXPECT_NO_THROW(make_policy(PolicySpec::parse("hier:nodes=2x3")));
  EXPECT_NO_THROW(make_policy(PolicySpec::parse("hier:nodes=auto")));
  for (const char* bad : {"hier:nodes=2", "hier:nodes=x2", "hier:nodes=2x", "hier:nodes=0x2", "hier:nodes=2x2x"})
    EXPECT_THROW(make_policy(PolicySpec::parse(bad)), dd::UsageError) << bad;
}

TEST(Policies, BaselineDecisions) {
  std::vector<LayerMeta> layers;
  for (int i = 0; i < 8; ++i) layers.push_back({"l" + std::to_string(i), "linear", 100, 400});
  auto ddp = make_policy(PolicySpec::parse("ddp"));
  ddp->setup(layers, 4);
  EXPECT_EQ(ddp->decide(3, 17), Action::AllreduceGrads);
  auto ls = make_policy(PolicySpec::parse("localsgd:k=4"));
  ls->setup(layers, 4);
  EXPECT_EQ(ls->decide(0, 3), Action::None);
  EXPECT_TRUE(ls->full_average_after(3));
  EXPECT_FALSE(ls->full_average_after(4));
  auto pl = make_policy(PolicySpec::parse("plsgd:h=4"));
  pl->setup(layers, 4);
  // Equal layers: groups of two contiguous layers; every layer exactly once per period.
  for (int l = 0; l < 8; ++l) {
    int syncs = 0;
    for (int s = 0; s < 4; ++s) syncs += pl->decide(l, s) == Action::AverageParams;
    EXPECT_EQ(syncs, 1) << l;
    EXPECT_EQ(pl->decide(l, 0), pl->decide(l, 4));
  }
  EXPECT_EQ(pl->decide(0, 0), Action::AverageParams);
  EXPECT_EQ(pl->decide(7, 3), Action::AverageParams);
}

TEST(Policies, DreamDdpFromSharedProfileNeedsMatchingLayers) {
  // A profile whose layer names are not this model's is refused with a clear error.
  auto p = make_policy(PolicySpec::parse(std::string("dreamddp:h=10,profile=") + DD_PROFILES + "/gpt2_16_1gbit"));
  std::vector<LayerMeta> layers{{"fc1", "linear", 10, 40}};
  EXPECT_THROW(p->setup(layers, 4), dd::UsageError);
}

// dreamddp: within every window of H steps each layer is averaged exactly once, plus its fill-ins; and the
// schedule from the shared GPT-2 profile is the solver's (modelled time at or below the authors' 0.5990 s).
TEST(Policies, DreamDdpAveragesEveryLayerOncePerWindow) {
  const std::string dir = std::string(DD_PROFILES) + "/gpt2_16_1gbit";
  auto prof = dd::sync::read_profile(dir);
  std::vector<LayerMeta> layers;
  for (auto& n : prof.names) layers.push_back({n, "linear", 1, 4});
  for (const char* extra : {",fillin=0", ""}) {  // fill-in is the default
    const int H = 10;
    auto p = make_policy(PolicySpec::parse("dreamddp:h=10,profile=" + dir + extra));
    p->setup(layers, 16);
    EXPECT_EQ(p->profile_window(), 0);
    auto fills = !std::string(extra).empty() ? FillIn(layers.size()) : fill_in(prof.bp, prof.comm, H, schedule_phases(prof.bp, prof.comm, H));
    for (int64_t w0 : {0, 7, 30}) {
      for (size_t l = 0; l < layers.size(); ++l) {
        int syncs = 0;
        for (int64_t s = w0; s < w0 + H; ++s) syncs += p->decide(int(l), s) == Action::AverageParams;
        EXPECT_EQ(syncs, 1 + int(fills[l].size())) << layers[l].name << " window at " << w0;
      }
    }
  }
  auto phases = schedule_phases(prof.bp, prof.comm, 10);
  EXPECT_LE(modelled_time(prof.bp, prof.comm, 10, phases), 0.5990);
}

// The built-in policies register themselves (core/sync/policies/, one file each) exactly as a user's policy does;
// the whole-archive link keeps them although nothing names them. A taken or malformed name is a programming error.
TEST(PolicyRegistry, BuiltinsAreRegisteredAndNamesAreUnique) {
  for (const char* name : {"ddp", "localsgd", "plsgd", "dreamddp", "hier", "fixed", "threshold", "autothreshold",
                           "staleness", "hybrid"})
    EXPECT_NE(make_policy(PolicySpec::parse(name)), nullptr) << name;
  PolicyFactory f = [](const PolicySpec& s) -> std::unique_ptr<Policy> { (void)s;
    return make_policy(PolicySpec::parse("ddp"));
  };
  EXPECT_THROW(register_policy("ddp", f), std::logic_error);
  EXPECT_THROW(register_policy("a:b", f), std::logic_error);
  EXPECT_THROW(register_policy("x+y", f), std::logic_error);
  EXPECT_THROW(register_policy("fresh-name", nullptr), std::logic_error);
  EXPECT_TRUE(register_policy("fresh-name", f));
  EXPECT_EQ(make_policy(PolicySpec::parse("fresh-name"))->describe(), "ddp");
}

// The core interface is what every policy has; a capability only where the policy needs it, and a composite names
// those of the policy it wraps (its profile, trial, votes and groups), plus its own plan line and counters.
TEST(PolicyCapabilities, EachPolicyTakesOnOnlyWhatItNeeds) {
  auto make = [](const std::string& spec) { return make_policy(PolicySpec::parse(spec)); };
  const auto ddp = make("ddp");
  const Capabilities& c = ddp->caps();
  EXPECT_FALSE(c.profiled || c.voting || c.trialled || c.reporting || c.checkpointed || c.grouped);
  const auto th = make("threshold");
  EXPECT_TRUE(th->caps().voting && th->caps().reporting && th->caps().checkpointed);
  EXPECT_FALSE(th->caps().profiled || th->caps().trialled || th->caps().grouped);
  const auto dd = make("dreamddp:h=4");
  EXPECT_TRUE(dd->caps().profiled && dd->caps().trialled && dd->caps().reporting && dd->caps().checkpointed);
  EXPECT_FALSE(dd->caps().voting || dd->caps().grouped);
  EXPECT_EQ(dd->profile_window(), 0);  // the default start records ordinary steps instead of lock-step ones
  EXPECT_GT(dd->observe_window(), 0);
  EXPECT_GT(make("dreamddp:h=4,lockstep=1")->profile_window(), 0);
  EXPECT_TRUE(make("hier:nodes=2x1")->caps().grouped);
  for (const std::string inner : {"dreamddp:h=4", "threshold", "hier:nodes=2x1", "plsgd:h=4"}) {
    const auto p = make(inner + "+staleness:t=3");
    const auto* cap = dynamic_cast<const StalenessCap*>(p.get());
    ASSERT_NE(cap, nullptr) << inner;
    const Capabilities& in = cap->inner()->caps();
    EXPECT_EQ(p->caps().profiled, in.profiled) << inner;
    EXPECT_EQ(p->caps().voting, in.voting) << inner;
    EXPECT_EQ(p->caps().trialled, in.trialled) << inner;
    EXPECT_EQ(p->caps().grouped, in.grouped) << inner;
    EXPECT_TRUE(p->caps().reporting && p->caps().checkpointed) << inner;
  }
  // The period and the merge keys come with the spec.
  EXPECT_EQ(make("plsgd:h=4,delay=2")->merge().delay, 2);
  EXPECT_EQ(make("plsgd:h=4,delay=2")->period(), 4);
  EXPECT_EQ(make("localsgd:k=6,outer=nesterov")->merge().nesterov, true);
}

// The timed window of a throughput figure: whole periods from a period boundary, and a note when it holds fewer than
// kSteadyPeriods of them (the figure then rests on too few periods to be a steady one).
TEST(TimedWindow, CountsWholePeriodsAndNotesTooFew) {
  std::vector<LayerMeta> layers{{"fc1", "linear", 10, 40}, {"fc2", "linear", 10, 40}};
  auto p = make_policy(PolicySpec::parse("localsgd:k=10"));
  p->setup(layers, 2);
  const TimedWindow many = timed_window(*p, 0, 200, true);  // warm-up 5 steps, then periods from step 10
  EXPECT_EQ(many.period, 10);
  EXPECT_EQ(many.warm, 10);
  EXPECT_EQ(many.end, 200);
  EXPECT_EQ(many.periods, 19);
  EXPECT_EQ(timed_window_note(many, 200), "");
  const TimedWindow two = timed_window(*p, 0, 35, true);  // warm-up 3 steps: periods [10, 30)
  EXPECT_EQ(two.periods, 2);
  EXPECT_EQ(timed_window_note(two, 35),
            "samples/s rests on 2 periods of 10 steps (steps 10-30), fewer than 3: not a steady figure; run more steps");
  const TimedWindow none = timed_window(*p, 0, 12, true);  // warm-up 1 step; no whole period fits after it
  EXPECT_EQ(none.periods, 0);
  EXPECT_NE(timed_window_note(none, 12).find("less than one period of 10 steps"), std::string::npos);
  auto ddp = make_policy(PolicySpec::parse("ddp"));
  ddp->setup(layers, 2);
  const TimedWindow flat = timed_window(*ddp, 0, 12, true);
  EXPECT_EQ(flat.period, 0);
  EXPECT_EQ(timed_window_note(flat, 12), "");  // not periodic: every step is a whole one
}

// The last period whose averages are left to the closing average (closing_period.h): plsgd's and dreamddp's, never
// Local SGD's (its whole-model average closes the run); that period is never timed.
TEST(TimedWindow, LeavesOutAClosingPeriod) {
  std::vector<LayerMeta> layers{{"fc1", "linear", 10, 40}, {"fc2", "linear", 10, 40}};
  auto plsgd = make_policy(PolicySpec::parse("plsgd:h=8"));
  plsgd->setup(layers, 2);
  EXPECT_EQ(closing_period_start(*plsgd, 31), 24);
  EXPECT_EQ(closing_period_start(*plsgd, 35), 32);  // a partial last period
  EXPECT_EQ(closing_period_start(*plsgd, -1), -1);  // the run's end is not known
  const TimedWindow closed = timed_window(*plsgd, 0, 96, true), open = timed_window(*plsgd, 0, 96, false);
  EXPECT_EQ(closed.warm, 8);
  EXPECT_EQ(closed.end, 88);
  EXPECT_EQ(closed.periods, 10);
  EXPECT_EQ(open.end, 96);
  EXPECT_EQ(timed_window(*plsgd, 0, 100, true).end, 96);  // the partial period [96, 100) is the closing one
  auto delayed = make_policy(PolicySpec::parse("plsgd:h=8,delay=1,compress=int8"));
  delayed->setup(layers, 2);
  EXPECT_EQ(closing_period_start(*delayed, 31), 24);
  auto outer = make_policy(PolicySpec::parse("plsgd:h=8,outer=nesterov"));
  outer->setup(layers, 2);
  EXPECT_EQ(closing_period_start(*outer, 31), 24);  // its closing sync is the outer step
  auto local = make_policy(PolicySpec::parse("localsgd:k=8"));
  local->setup(layers, 2);
  EXPECT_EQ(closing_period_start(*local, 31), -1);
  EXPECT_EQ(timed_window(*local, 0, 96, true).end, 96);
  auto ddp = make_policy(PolicySpec::parse("ddp"));
  ddp->setup(layers, 2);
  EXPECT_EQ(closing_period_start(*ddp, 31), -1);
}

// The grammar: a composite is split once, into two parsed parts; its merge keys belong to the wrapped policy.
TEST(PolicySpecGrammar, CompositesAreParsedIntoParts) {
  const auto s = PolicySpec::parse("plsgd:h=4,compress=topk:p=1,values=int8+staleness:t=8");
  ASSERT_TRUE(s.composite());
  ASSERT_EQ(s.parts.size(), 2u);
  EXPECT_EQ(s.base().name, "plsgd");
  EXPECT_EQ(s.base().get_str("compress", ""), "topk");
  EXPECT_EQ(s.base().get_str("compress.p", ""), "1");
  EXPECT_EQ(s.base().get_str("compress.values", ""), "int8");
  ASSERT_NE(s.cap(), nullptr);
  EXPECT_EQ(s.cap()->get_int("t", 0, 1, 100), 8);
  // Either order; a number's exponent sign is no composition.
  const auto r = PolicySpec::parse("staleness:t=3+dreamddp:h=8,outer=nesterov:lr=1e+0");
  ASSERT_TRUE(r.composite());
  EXPECT_EQ(r.base().name, "dreamddp");
  EXPECT_EQ(r.base().get_str("outer.lr", ""), "1e+0");
  EXPECT_FALSE(PolicySpec::parse("plsgd:h=4").composite());
  for (const char* bad : {"plsgd:h=4+", "+staleness:t=2", "plsgd:h=4+ddp", "staleness:t=2+staleness:t=3",
                          "plsgd:h=4+staleness:t=2+staleness:t=3"})
    EXPECT_THROW(PolicySpec::parse(bad), dd::UsageError) << bad;
}

// Every merge key works inside a composite (the composite's merge is the wrapped policy's), or is refused naming the
// key and the composite: a key must never be parsed and then dropped.
TEST(PolicySpecGrammar, MergeKeysHoldInsideComposites) {
  auto m = [](const std::string& spec) { return make_policy(PolicySpec::parse(spec))->merge(); };
  EXPECT_EQ(m("plsgd:h=4,compress=topk:p=1+staleness:t=8").compress, Codec::TopK);
  EXPECT_EQ(m("plsgd:h=4,compress=topk:p=1+staleness:t=8").topk.percent, 1.0);
  EXPECT_EQ(m("plsgd:h=4,compress=int8+staleness:t=8").compress, Codec::Int8);
  EXPECT_TRUE(m("staleness:t=8+localsgd:k=4,compress=auto").compress_auto);
  EXPECT_TRUE(m("plsgd:h=4,outer=nesterov+staleness:t=8").nesterov);
  EXPECT_EQ(m("plsgd:h=4,outer=nesterov:lr=0.5,momentum=0.8+staleness:t=8").outer_lr, 0.5);
  // The description names what runs, merge keys included.
  EXPECT_EQ(make_policy(PolicySpec::parse("plsgd:h=4,compress=int8+staleness:t=8"))->describe(),
            "plsgd:h=4,compress=int8+staleness:t=8");
  try {
    make_policy(PolicySpec::parse("plsgd:h=4,delay=1+staleness:t=8"));
    ADD_FAILURE() << "delay= inside a composite was accepted";
  } catch (const dd::UsageError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("delay=1"), std::string::npos) << w;
    EXPECT_NE(w.find("plsgd:h=4,delay=1+staleness:t=8"), std::string::npos) << w;
  }
  EXPECT_THROW(make_policy(PolicySpec::parse("plsgd:h=4+staleness:t=8,compress=int8")), dd::UsageError);
}

// Numbers take one plain decimal form: no spaces, no hexadecimal, no sign before them, no inf or nan.
TEST(PolicySpecGrammar, NumbersArePlainDecimals) {
  for (const char* bad : {"plsgd:h=4,compress=topk:p= 1", "plsgd:h=4,compress=topk:p=0x10",
                          "plsgd:h=4,compress=topk:p=+1", "plsgd:h=4,compress=topk:p=inf", "plsgd:h= 4",
                          "plsgd:h=0x4", "plsgd:h=4 ", "plsgd:h=+4", "plsgd:h=4.", "localsgd:k=1e1",
                          "plsgd:h=4,outer=nesterov:lr=nan", "plsgd:h=4,outer=nesterov:lr=1e", "plsgd:h=4,outer=nesterov:lr=."})
    EXPECT_THROW(make_policy(PolicySpec::parse(bad)), dd::UsageError) << bad;
  for (const char* good : {"plsgd:h=4,compress=topk:p=0.5", "plsgd:h=4,compress=topk:p=.5",
                           "plsgd:h=4,compress=topk:p=5e-1", "plsgd:h=4,outer=nesterov:lr=1.,momentum=0"})
    EXPECT_NO_THROW(make_policy(PolicySpec::parse(good))) << good;
}
