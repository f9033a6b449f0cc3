// choose_in_step: without contention the paper's choice, bitwise; with it, Local SGD's schedule where the overlap
// costs more than it hides.
#include <gtest/gtest.h>

#include <random>

#include "core/sync/schedule/schedule_choice.h"
#include "core/sync/schedule/schedule_solver.h"

using namespace dd::sync;

TEST(ScheduleChoice, WithoutContentionIsTheSolverScheduleWithFillIn) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int L = 2 + int(rng() % 8), H = 1 + int(rng() % 6);
    std::vector<double> b(L), c(L);
    for (int l = 0; l < L; ++l) b[l] = u(rng), c[l] = 3 * u(rng);
    const auto solved = schedule_phases(b, c, H);
    for (bool fillin : {false, true}) {
      const auto ch = choose_in_step(b, c, H, solved, fillin, {});
      EXPECT_EQ(ch.phase, solved) << trial;
      EXPECT_EQ(ch.fill, fillin ? fill_in(b, c, H, solved) : FillIn(size_t(L))) << trial;
      EXPECT_FALSE(ch.local_sgd) << trial;  // Local SGD is a feasible schedule of the paper's model
      EXPECT_EQ(ch.layerwise_s, modelled_time(b, c, H, solved, fillin ? &ch.fill : nullptr)) << trial;
      EXPECT_EQ(ch.localsgd_s, localsgd_time(b, c, H)) << trial;
    }
  }
}

// Two layers, H = 2, the transfer of the first in backward order overlapping the other's backward. Without
// contention layer-wise wins (it hides that transfer); with compute and communication both x3 while they overlap,
// Local SGD's blocking average (which overlaps nothing) is faster and is chosen.
TEST(ScheduleChoice, HeavyContentionPicksLocalSgd) {
  const std::vector<double> b{1, 1}, c{1, 1};
  const auto solved = schedule_phases(b, c, 2);
  const auto free = choose_in_step(b, c, 2, solved, true, {});
  EXPECT_FALSE(free.local_sgd);
  EXPECT_LT(free.layerwise_s, free.localsgd_s);
  const auto shared = choose_in_step(b, c, 2, solved, true, Contention{2, 2});
  EXPECT_TRUE(shared.local_sgd);
  EXPECT_GT(shared.layerwise_s, shared.localsgd_s);
  EXPECT_EQ(shared.localsgd_s, localsgd_time(b, c, 2));
}

// fused_comm: a layer that joins its launch-order neighbour's bucket (same phase, bucket under the cap) pays no
// latency of its own; the first of each run, and the first after a full bucket, pays it.
TEST(ScheduleChoice, FusedCommTakesTheLatencyOffLayersThatJoinABucket) {
  const std::vector<double> c{5, 5, 5, 5};
  const std::vector<int64_t> bytes{10, 10, kFusedCap, 10};
  // Launch order 3, 2, 1, 0. Phases 0 0 0 1: layer 3 starts a run; 2 starts another; 1 joins 2 but 2 filled the
  // bucket to the cap, so 1 starts a new bucket; 0 joins 1.
  EXPECT_EQ(fused_comm(c, bytes, {0, 0, 0, 1}, 2.0), (std::vector<double>{3, 5, 5, 5}));
  EXPECT_EQ(fused_comm(c, {10, 10, 10, 10}, {0, 0, 0, 0}, 2.0), (std::vector<double>{3, 3, 3, 5}));
  EXPECT_EQ(fused_comm(c, {10, 10, 10, 10}, {0, 1, 0, 1}, 2.0), c);
  // c = 2 + bytes / 10: the fit recovers the intercept; proportional times have none.
  EXPECT_NEAR(fitted_alpha({3, 4, 6}, {10, 20, 40}), 2.0, 1e-12);
  EXPECT_EQ(fitted_alpha({1, 2, 4}, {10, 20, 40}), 0.0);
}

// A per-collective latency the solver's model does not see in fused buckets: an interleaved schedule pays it at
// every layer, plsgd's contiguous split once per bucket. With the layers' sizes, the choice sees it and takes the
// split; with times proportional to the sizes (no latency) it keeps the solver's phases, bitwise.
TEST(ScheduleChoice, FusedLatencyPrefersContiguousPhases) {
  const int L = 12, H = 3;
  std::vector<double> b(L, 0.01), c(L);
  std::vector<int64_t> bytes(L);
  for (int l = 0; l < L; ++l) bytes[size_t(l)] = 1000 + 100 * l, c[l] = 0.02 + 1e-5 * double(bytes[size_t(l)]);
  std::vector<int> interleaved(L);
  for (int l = 0; l < L; ++l) interleaved[l] = l % H;
  const auto with = choose_in_step(b, c, H, interleaved, false, {}, bytes);
  EXPECT_TRUE(with.fused_plsgd);
  EXPECT_EQ(with.phase, contiguous_groups(c, H));
  EXPECT_NEAR(with.alpha_s, 0.02, 1e-9);
  EXPECT_LT(with.fused_plsgd_s, 0.99 * with.fused_solved_s);
  EXPECT_EQ(with.layerwise_s, modelled_time(b, fused_comm(c, bytes, with.phase, with.alpha_s), H, with.phase,
                                            &with.fill));
  std::vector<double> prop(L);
  for (int l = 0; l < L; ++l) prop[l] = 3e-5 * double(bytes[size_t(l)]);
  const auto without = choose_in_step(b, prop, H, interleaved, false, {}, bytes);
  EXPECT_FALSE(without.fused_plsgd);
  EXPECT_EQ(without.phase, interleaved);
  EXPECT_EQ(without.layerwise_s, modelled_time(b, prop, H, interleaved, &without.fill));
}
