// Exact sharding: N ranks x batch b == one process x batch N*b, epochs are permutations, order is pinned.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "core/data/sharder.h"
#include "core/data/shuffle.h"

namespace dd::data {
namespace {

std::vector<int64_t> perm(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  permutation(n, seed, stream, p.data());
  return p;
}

bool is_permutation_of_iota(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != int64_t(i)) return false;
  return true;
}

// Golden values from an independent Python transcription of data/README.md's rule; changing them changes
// every run's data order, so it must be deliberate.
TEST(Shuffle, PinnedToTheDocumentedRule) {
  EXPECT_EQ(perm(10, 42, 0), (std::vector<int64_t>{6, 7, 9, 8, 2, 0, 1, 3, 5, 4}));
  EXPECT_EQ(perm(10, 42, 1), (std::vector<int64_t>{9, 7, 1, 4, 8, 3, 0, 6, 5, 2}));
  const auto p = perm(60000, 1, 0);
  EXPECT_EQ(std::vector<int64_t>(p.begin(), p.begin() + 8),
            (std::vector<int64_t>{45822, 35946, 18619, 46445, 6891, 3600, 2036, 844}));
  EXPECT_TRUE(is_permutation_of_iota(p));
}

TEST(Shuffle, BoundedDrawIsInRangeAndCoversIt) {
  SplitMix64 rng(5);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = rng.below(7);
    ASSERT_LT(v, 7u);
    ++hits[size_t(v)];
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
  EXPECT_EQ(SplitMix64(9).below(1), 0u);
}

TEST(Shuffle, FixedSubset) {
  const auto a = fixed_subset(1000, 64, 3);
  EXPECT_EQ(a, fixed_subset(1000, 64, 3));
  EXPECT_NE(a, fixed_subset(1000, 64, 4));
  auto s = a;
  std::sort(s.begin(), s.end());
  EXPECT_EQ(std::unique(s.begin(), s.end()), s.end());
  EXPECT_GE(s.front(), 0);
  EXPECT_LT(s.back(), 1000);
  // Not the prefix of any early epoch's order (it is its own stream).
  const auto e0 = perm(1000, 3, 0);
  EXPECT_NE(a, std::vector<int64_t>(e0.begin(), e0.begin() + 64));
  EXPECT_THROW(fixed_subset(10, 11, 1), dd::UsageError);
}

// For several sizes, world sizes and batches, over steps spanning several epochs: the concatenation of the
// ranks' slices equals the single-process batch of N*b, and global_indices agrees with both.
TEST(Sharder, ShardsConcatenateToTheSingleProcessBatch) {
  for (int64_t size : {10, 97, 100, 1000})
    for (int world : {1, 2, 3, 4, 8})
      for (int64_t b : {1, 5, 7, 32}) {
        const uint64_t seed = 1234;
        const Sharder single(size, seed, 1, 0, world * b);
        std::vector<Sharder> ranks;
        for (int r = 0; r < world; ++r) ranks.emplace_back(size, seed, world, r, b);
        const int64_t steps = 3 * size / (world * b) + 3;  // at least three epoch boundaries
        std::vector<int64_t> want(size_t(world * b)), got, glob(size_t(world * b)), slice(static_cast<size_t>(b));
        for (int64_t t = 0; t < steps; ++t) {
          single.indices(t, want.data());
          got.clear();
          for (const Sharder& s : ranks) {
            s.indices(t, slice.data());
            got.insert(got.end(), slice.begin(), slice.end());
          }
          ASSERT_EQ(got, want) << "size " << size << " world " << world << " b " << b << " step " << t;
          ranks[0].global_indices(t, glob.data());
          ASSERT_EQ(glob, want);
        }
      }
}

TEST(Sharder, EveryEpochIsAPermutation) {
  const int64_t size = 100;
  const Sharder s(size, 77, 4, 0, 7);  // global batch 28 straddles epoch boundaries
  std::vector<int64_t> stream, g(28);
  for (int64_t t = 0; t < 50; ++t) {  // 1400 positions = 14 epochs
    s.global_indices(t, g.data());
    stream.insert(stream.end(), g.begin(), g.end());
  }
  std::vector<int64_t> prev;
  for (int64_t e = 0; e < 14; ++e) {
    const std::vector<int64_t> epoch(stream.begin() + e * size, stream.begin() + (e + 1) * size);
    EXPECT_TRUE(is_permutation_of_iota(epoch)) << "epoch " << e;
    EXPECT_EQ(epoch, perm(size, 77, uint64_t(e))) << "epoch " << e;
    EXPECT_NE(epoch, prev) << "epoch " << e << " repeats the previous order";
    prev = epoch;
  }
}

TEST(Sharder, StraddlingBatchTakesTheNextEpochsHead) {
  const Sharder s(10, 5, 1, 0, 4);
  const auto p0 = perm(10, 5, 0), p1 = perm(10, 5, 1);
  EXPECT_EQ(s.batch(2), (std::vector<int64_t>{p0[8], p0[9], p1[0], p1[1]}));
  EXPECT_EQ(s.sample_at(12), p1[2]);
  // Batch larger than the dataset: one step spans three epochs.
  const Sharder big(3, 5, 2, 1, 4);  // global batch 8; rank 1 takes positions 4..7 of step 0
  const auto q0 = perm(3, 5, 0), q1 = perm(3, 5, 1), q2 = perm(3, 5, 2);
  EXPECT_EQ(big.batch(0), (std::vector<int64_t>{q1[1], q1[2], q2[0], q2[1]}));
  EXPECT_DOUBLE_EQ(big.epochs_after(3), 8.0);
  (void)q0;
}

TEST(Sharder, DeterministicFromSeedAndStatelessInStep) {
  const Sharder a(60000, 9, 4, 2, 64), b(60000, 9, 4, 2, 64), c(60000, 10, 4, 2, 64);
  EXPECT_EQ(a.batch(5), b.batch(5));
  EXPECT_NE(a.batch(5), c.batch(5));
  // Out of order queries (resume, or a probe) give the same answers as in order ones.
  const auto late = a.batch(2000), early = a.batch(3);
  EXPECT_EQ(b.batch(3), early);
  EXPECT_EQ(b.batch(2000), late);
  // Ranks take disjoint slices.
  auto r2 = a.batch(7);
  const Sharder r3(60000, 9, 4, 3, 64);
  auto s3 = r3.batch(7);
  std::sort(r2.begin(), r2.end());
  std::sort(s3.begin(), s3.end());
  std::vector<int64_t> both;
  std::set_intersection(r2.begin(), r2.end(), s3.begin(), s3.end(), std::back_inserter(both));
  EXPECT_TRUE(both.empty());
}

TEST(Sharder, RefusesBadArguments) {
  EXPECT_THROW(Sharder(0, 1, 1, 0, 1), dd::UsageError);
  EXPECT_THROW(Sharder(10, 1, 0, 0, 1), dd::UsageError);
  EXPECT_THROW(Sharder(10, 1, 2, 2, 1), dd::UsageError);
  EXPECT_THROW(Sharder(10, 1, 2, -1, 1), dd::UsageError);
  EXPECT_THROW(Sharder(10, 1, 2, 0, 0), dd::UsageError);
}

}  // namespace
}  // namespace dd::data
