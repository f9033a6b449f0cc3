// The engine's self-profile on ranks as threads: one agreed profile on every rank, its backward times paced to the
// slowest rank (a step waits for the slowest rank's layers), and its all-reduce model fitted at the model's sizes.
#include <gtest/gtest.h>

#include <mutex>

#include "core/sync/profile/self_profile.h"
#include "core/sync/types/data_path.h"
#include "tests/sync/ranks_harness.h"

using dd::testing_harness::run_ranks;
using namespace dd;
using namespace dd::sync;

TEST(SelfProfile, BackwardPacedToTheSlowestRankAndEqualOnEveryRank) {
  const int world = 2;
  // Rank r's backward: 1, 2, 3 ms per layer on rank 0, twice that on rank 1 (ready times in forward order: layer
  // l is ready at the sum of the backward times of the layers after it and its own).
  std::vector<LayerMeta> layers{{"a", "linear", 64, 256}, {"b", "linear", 4096, 16384}, {"c", "linear", 1 << 18, 1 << 20}};
  std::vector<LayerTimes> got(world);
  std::mutex mu;
  run_ranks(world, [&](int rank, Backend& b) {
    const double k = rank == 0 ? 1e-3 : 2e-3;
    SelfProfile p(3);
    const double t_bwd = 0;
    std::vector<double> ready{6 * k, 5 * k, 3 * k};  // c takes 3k, b 2k, a 1k
    p.add(0, ready, t_bwd);  // warm-up: skipped
    p.add(1, ready, t_bwd);
    HostDataPath dp;
    const Contention none;
    LayerTimes t = p.finish(dp, b, layers, &none);
    std::lock_guard<std::mutex> lock(mu);
    got[size_t(rank)] = t;
  });
  ASSERT_EQ(got[0].backward_s.size(), 3u);
  EXPECT_EQ(got[0].backward_s, got[1].backward_s);  // bitwise one profile
  EXPECT_EQ(got[0].comm_s, got[1].comm_s);
  // The rank average is 1.5, 3, 4.5 ms (9 ms); the slowest rank's backward is 12 ms: each layer x 12/9.
  const double want[3] = {2e-3, 4e-3, 6e-3};
  for (int l = 0; l < 3; ++l) EXPECT_NEAR(got[0].backward_s[size_t(l)], want[l], 1e-8) << "layer " << l;
  // The comm model grows with the layer's size and is never negative.
  EXPECT_GE(got[0].comm_s[0], 0.0);
  EXPECT_LE(got[0].comm_s[0], got[0].comm_s[1]);
  EXPECT_LE(got[0].comm_s[1], got[0].comm_s[2]);
}
