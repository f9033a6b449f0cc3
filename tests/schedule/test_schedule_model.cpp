// Time model, baselines, plsgd grouping and fill-in against hand-computed small examples.
#include <gtest/gtest.h>

#include <random>

#include "core/sync/schedule/schedule_model.h"

using namespace dd::sync;

namespace {
// b = {1,2,3}, c = {2,1,4} (forward order): B = 6, ready times R = {6, 5, 3}.
const std::vector<double> b3{1, 2, 3}, c3{2, 1, 4};
}  // namespace

TEST(ScheduleModel, ReadyTimesFollowBackwardOrder) {
  EXPECT_EQ(ready_times(b3), (std::vector<double>{6, 5, 3}));
  EXPECT_DOUBLE_EQ(total_backward(b3), 6.0);
}

TEST(ScheduleModel, SinglePhaseFifoChain) {
  // l=2: 3 -> 7; l=1: ready 5, starts 7 -> 8; l=0: ready 6, starts 8 -> 10; w = 10 - 6 = 4.
  EXPECT_EQ(phase_waits(b3, c3, 1, {0, 0, 0}), (std::vector<double>{4}));
  EXPECT_DOUBLE_EQ(modelled_time(b3, c3, 1, {0, 0, 0}), 10.0);
}

TEST(ScheduleModel, TwoPhases) {
  // phase 0 = {0, 2}: 3 -> 7, then 7 -> 9: w0 = 3. phase 1 = {1}: 5 -> 6: w1 = 0. 6 + 3/2.
  EXPECT_EQ(phase_waits(b3, c3, 2, {0, 1, 0}), (std::vector<double>{3, 0}));
  EXPECT_DOUBLE_EQ(modelled_time(b3, c3, 2, {0, 1, 0}), 7.5);
  // phase 0 = {1, 2}: 3 -> 7 -> 8: w0 = 2; phase 1 = {0}: 6 -> 8: w1 = 2. 6 + 4/2.
  EXPECT_DOUBLE_EQ(modelled_time(b3, c3, 2, {1, 0, 0}), 8.0);
}

TEST(ScheduleModel, IdleChannelGap) {
  // b = {1,1,4}, c = {.5,.5,1}: R = {6,5,4}; 4 -> 5, 5 -> 5.5, idle, 6 -> 6.5: w = 0.5.
  EXPECT_DOUBLE_EQ(modelled_time({1, 1, 4}, {.5, .5, 1}, 1, {0, 0, 0}), 6.5);
}

TEST(ScheduleModel, Baselines) {
  EXPECT_DOUBLE_EQ(ddp_time(b3, c3), 13.0);
  EXPECT_DOUBLE_EQ(localsgd_time(b3, c3, 2), 9.5);
}

TEST(ScheduleModel, FillInAddsOnlyFreeSyncs) {
  // b = {1,1,4}, c = {.5,.5,1}: R = {6,5,4}, B = 6; phases {0,1,1}, H = 2. Phase 0 = {0} ends at 6.5. Layer 2 would
  // end in time (ready at 4, ends at 5) but is not next to layer 0: it would be a collective of its own, so it does
  // not join. Layer 1 does not either: next to layer 0 the engine fuses them into one bucket launched at 6, ending
  // at 7. Phase 1 = {1,2} ends at 5.5 <= B: layer 0 would join the bucket {0,1,2}, launched at 6, ending at 8.
  const std::vector<double> b{1, 1, 4}, c{.5, .5, 1};
  const std::vector<int> phase{0, 1, 1};
  const FillIn f = fill_in(b, c, 2, phase);
  EXPECT_EQ(f, (FillIn{{}, {}, {}}));
  EXPECT_DOUBLE_EQ(modelled_time(b, c, 2, phase, &f), 6.25);
}

TEST(ScheduleModel, FillInNeverOpensACollectiveOfItsOwn) {
  // b = 1 each: R = {4,3,2,1}, B = 4; c = .01 each, the channel idle almost all the time.
  const std::vector<double> b{1, 1, 1, 1}, c{.01, .01, .01, .01};
  // Phase 0 = {0} ends at 4.01. Layers 3 and 2 would be free there as a bucket of their own (ready at 1, ending at
  // 2.02, before layer 0 launches) but would be a separate collective: refused. Layer 1, next to 0, would fuse into
  // its bucket, launched at 4, ending at 4.02: not free. Phase 1 = {1,2,3}: layer 0 fused makes one bucket launched at
  // 4, ending at 4.04 > B: not free either.
  EXPECT_EQ(fill_in(b, c, 2, {0, 1, 1, 1}), (FillIn{{}, {}, {}, {}}));
  // Phase 0 = {1} (ready at 3): layer 2 next to it fuses into its bucket, still launched at 3 (3.02), and then layer
  // 3 (3.03): both join. Layer 0 would move the launch to 4 (4.02 > 4). Phase 1 = {0,2,3} takes nothing.
  EXPECT_EQ(fill_in(b, c, 2, {1, 0, 1, 1}), (FillIn{{}, {}, {0}, {0}}));
}

TEST(ScheduleModel, FillInNeverOpensACollectiveInAStepWithoutOne) {
  // Three layers, H=4: phases 2 and 3 hold no layer, so fill-in adds nothing there even though the channel is idle.
  const std::vector<double> b{1, 1, 4}, c{.1, .1, .1};
  const std::vector<int> phase{0, 0, 1};
  const FillIn f = fill_in(b, c, 4, phase);
  ASSERT_EQ(f.size(), 3u);
  size_t added = 0;
  for (size_t l = 0; l < f.size(); ++l)
    for (int p : f[l]) {
      EXPECT_TRUE(p == 0 || p == 1) << "layer " << l << " filled into empty phase " << p;
      ++added;
    }
  // Layer 1 joins phase 1 (fused with layer 2: launched at 5, ends 5.2 <= B = 6); layer 2 cannot join phase 0
  // (fused with {0,1}: launched at 6, ends 6.3 > 6.1), nor layer 0 phase 1 (ends 6.1 > B).
  EXPECT_EQ(f, (FillIn{{}, {1}, {}}));
  EXPECT_EQ(added, 1u);
}

TEST(ScheduleModel, FillInCountsInTheModel) {
  // A fill-in that is not free must show up: layer 0 added at phase 1 of the example above costs 0.5 / 2.
  const FillIn f{{1}, {}, {}};
  EXPECT_DOUBLE_EQ(modelled_time({1, 1, 4}, {.5, .5, 1}, 2, {0, 0, 1}, &f), 6.5);
}

TEST(ScheduleModel, DelayedChannelRunsAcrossIterations) {
  // One layer: backward 1, average 3. In-step (T = 0) and T = 1 pay 1 + 3 per iteration; with T = 2 the channel
  // runs back to back and the iteration takes its 3.
  EXPECT_DOUBLE_EQ(delayed_time({1}, {3}, 1, {0}, 0, 0, 0), 4.0);
  EXPECT_DOUBLE_EQ(delayed_time({1}, {3}, 1, {0}, 1, 0, 0), 4.0);
  EXPECT_NEAR(delayed_time({1}, {3}, 1, {0}, 2, 0, 0), 3.0, 1e-12);
  // Forward and update overlap the channel too once T >= 1: 0.5 + 1 + 1.5 = 3 of compute hides the 3 of comm.
  EXPECT_NEAR(delayed_time({1}, {3}, 1, {0}, 2, 0.5, 1.5), 3.0, 1e-12);
  EXPECT_THROW(delayed_time({1}, {3}, 1, {0}, -1, 0, 0), std::invalid_argument);
  EXPECT_THROW(delayed_time({1}, {3}, 1, {1}, 1, 0, 0), std::invalid_argument);
}

TEST(ScheduleModel, DelayedTimeIsTheInStepModelAtZeroAndNeverWorseWithADelay) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int rep = 0; rep < 40; ++rep) {
    const int L = 3 + rep % 9, H = 1 + rep % 5;
    std::vector<double> b(L), c(L);
    std::vector<int> ph(L);
    for (int l = 0; l < L; ++l) b[l] = u(rng), c[l] = 3 * u(rng), ph[l] = int(rng() % unsigned(H));
    const double f = u(rng), up = u(rng);
    const double t0 = delayed_time(b, c, H, ph, 0, f, up);
    EXPECT_NEAR(t0, modelled_time(b, c, H, ph) + f + up, 1e-9 * t0) << "rep " << rep;
    double C = 0;
    for (double x : c) C += x;
    for (int T = 1; T <= 3; ++T) {
      const double t = delayed_time(b, c, H, ph, T, f, up);
      EXPECT_LE(t, t0 * (1 + 1e-12)) << "rep " << rep << " T " << T;
      EXPECT_GE(t, std::max(f + total_backward(b) + up, C / H) * (1 - 1e-12)) << "rep " << rep << " T " << T;
    }
  }
}

TEST(ScheduleModel, DelayedLocalSgdLaunchesAfterTheUpdate) {
  // One layer, compute 1 per iteration (backward only), average 3, K = 3. Blocking (T = 0): 3 + 3 per three
  // iterations. T = 1 merges at the start of the very next iteration, so nothing overlaps: the same 2. T = 2
  // overlaps one iteration: 3 + (3 - 1) per three iterations.
  EXPECT_DOUBLE_EQ(localsgd_delayed_time({1}, {3}, 3, 0, 0, 0), 2.0);
  EXPECT_NEAR(localsgd_delayed_time({1}, {3}, 3, 1, 0, 0), 2.0, 1e-12);
  EXPECT_NEAR(localsgd_delayed_time({1}, {3}, 3, 2, 0, 0), 5.0 / 3, 1e-12);
  // Forward and update are compute like backward: 0.25 + 0.5 + 0.25 per iteration, T = 3 of K = 4 hides 2 of the 3.
  EXPECT_NEAR(localsgd_delayed_time({0.5}, {3}, 4, 3, 0.25, 0.25), (4 * 1.0 + 1.0) / 4, 1e-12);
  EXPECT_THROW(localsgd_delayed_time({1}, {3}, 2, 2 + 1, 0, 0), std::invalid_argument);
  EXPECT_THROW(localsgd_delayed_time({1}, {3}, 2, -1, 0, 0), std::invalid_argument);
  EXPECT_THROW(localsgd_delayed_time({1}, {3}, 2, 1, -1, 0), std::invalid_argument);

  std::mt19937 rng(12);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int rep = 0; rep < 40; ++rep) {
    const int L = 2 + rep % 7, K = 2 + rep % 7;
    std::vector<double> b(L), c(L);
    for (int l = 0; l < L; ++l) b[l] = u(rng), c[l] = 4 * u(rng);
    const double f = u(rng), up = u(rng);
    const double t0 = localsgd_delayed_time(b, c, K, 0, f, up);
    EXPECT_NEAR(t0, localsgd_time(b, c, K) + f + up, 1e-9 * t0) << "rep " << rep;
    double C = 0;
    for (double x : c) C += x;
    double prev = t0;
    for (int T = 1; T < K; ++T) {
      const double t = localsgd_delayed_time(b, c, K, T, f, up);
      EXPECT_LE(t, prev * (1 + 1e-12)) << "rep " << rep << " T " << T;  // a longer delay never costs time
      EXPECT_GE(t, std::max(f + total_backward(b) + up, C / K) * (1 - 1e-12)) << "rep " << rep << " T " << T;
      prev = t;
    }
  }
}

TEST(ScheduleModel, ContiguousGroups) {
  EXPECT_EQ(contiguous_groups({1, 1, 1, 1, 1, 1}, 3), (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(contiguous_groups({10, 1, 1, 1, 1}, 3), (std::vector<int>{0, 1, 2, 2, 2}));
  EXPECT_EQ(contiguous_groups({1, 1}, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(contiguous_groups({1, 2, 3, 4}, 1), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(plsgd_time(b3, c3, 2), modelled_time(b3, c3, 2, contiguous_groups(c3, 2)));
}

TEST(ScheduleModel, RejectsBadInput) {
  EXPECT_THROW(modelled_time(b3, c3, 0, {0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(modelled_time(b3, {1, 2}, 1, {0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(modelled_time(b3, c3, 2, {0, 2, 0}), std::invalid_argument);
  EXPECT_THROW(modelled_time(b3, c3, 2, {0, 0}), std::invalid_argument);
}

// Contention (contention.h), hand-computed. b = {2, 2} (R = {4, 2}), c = {0, 3}, one phase: layer 1 launches at 2.
// Communication x2 while backward runs: 2 s of backward carry 1 s of the transfer, the other 2 s follow: end 6.
TEST(ScheduleModel, ContendedCommunicationRunsSlowerDuringBackward) {
  EXPECT_DOUBLE_EQ(modelled_time({2, 2}, {0, 3}, 1, {0, 0}), 5.0);
  EXPECT_DOUBLE_EQ(modelled_time({2, 2}, {0, 3}, 1, {0, 0}, nullptr, Contention{0, 1}), 6.0);
}

// Compute x2 while communicating: backward loses half of every second the transfer overlaps it. Four rounds of the
// fixed point: backward 5, 5.25, 5.3125, 5.328125; the transfer starts at the stretched ready time 2 x 5.3125/4
// and ends 3 s later, 5.65625.
TEST(ScheduleModel, ContendedComputeStretchesBackward) {
  EXPECT_DOUBLE_EQ(modelled_time({2, 2}, {0, 3}, 1, {0, 0}, nullptr, Contention{1, 0}), 5.65625);
  // A transfer launched when backward has ended overlaps nothing: no charge.
  EXPECT_DOUBLE_EQ(modelled_time({2, 2}, {3, 0}, 1, {0, 0}, nullptr, Contention{1, 1}),
                   modelled_time({2, 2}, {3, 0}, 1, {0, 0}));
  EXPECT_THROW(modelled_time({2, 2}, {0, 3}, 1, {0, 0}, nullptr, Contention{-1, 0}), std::invalid_argument);
}

// Contention only ever adds time, never below the paper's model, and more of it never helps.
TEST(ScheduleModel, ContentionNeverMakesAScheduleFaster) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + int(rng() % 7), H = 1 + int(rng() % 4);
    std::vector<double> b(L), c(L);
    std::vector<int> phase(L);
    for (int l = 0; l < L; ++l) b[l] = u(rng), c[l] = 2 * u(rng), phase[l] = int(rng() % H);
    const Contention lo{u(rng), u(rng)}, hi{lo.compute + u(rng), lo.comm + u(rng)};
    const double t0 = modelled_time(b, c, H, phase), t1 = modelled_time(b, c, H, phase, nullptr, lo),
                 t2 = modelled_time(b, c, H, phase, nullptr, hi);
    EXPECT_GE(t1, t0 * (1 - 1e-12)) << trial;
    EXPECT_GE(t2, t1 * (1 - 1e-12)) << trial;
  }
}
