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
