// plan_buckets: launch order, contiguity, caps, and breaks at layers that do nothing.
#include <gtest/gtest.h>

#include "core/sync/types/bucket_plan.h"

using namespace dd::sync;

namespace {
std::vector<LayerRange> ranges(const std::vector<int64_t>& sizes) {
  std::vector<LayerRange> r;
  int64_t off = 0;
  for (auto n : sizes) {
    r.push_back({off, n, 0, 0});
    off += n;
  }
  return r;
}
}  // namespace

TEST(BucketPlan, ReverseOrderContiguousAndCapped) {
  auto r = ranges({100, 200, 300, 400, 500});  // floats
  std::vector<Action> a(5, Action::AllreduceGrads);
  auto b = plan_buckets(a, r, 4 * 500, 4 * 800);
  // As PyTorch's Reducer: a bucket takes layers until it reaches its cap. First bucket: layer 4 alone (500
  // floats reach the first cap); then 3, 2 (700 < 800) and 1 (900 >= 800 closes it); then 0.
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].lo, 4);
  EXPECT_EQ(b[0].hi, 4);
  EXPECT_EQ(b[1].lo, 1);
  EXPECT_EQ(b[1].hi, 3);
  EXPECT_EQ(b[1].param_off, 100);
  EXPECT_EQ(b[1].param_n, 900);
  EXPECT_EQ(b[2].lo, 0);
  EXPECT_EQ(b[2].param_n, 100);
  int64_t total = 0;
  for (auto& x : b) total += x.param_n;
  EXPECT_EQ(total, 1500);
}

TEST(BucketPlan, NoneAndActionChangesBreakBuckets) {
  auto r = ranges({10, 10, 10, 10, 10});
  std::vector<Action> a{Action::AverageParams, Action::AverageParams, Action::None, Action::AllreduceGrads,
                        Action::AverageParams};
  auto b = plan_buckets(a, r, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].action, Action::AverageParams);
  EXPECT_EQ(b[0].lo, 4);
  EXPECT_EQ(b[1].action, Action::AllreduceGrads);
  EXPECT_EQ(b[1].lo, 3);
  EXPECT_EQ(b[2].lo, 0);
  EXPECT_EQ(b[2].hi, 1);
}

TEST(BucketPlan, BuffersTravelWithAveragedLayers) {
  std::vector<LayerRange> r{{0, 8, 0, 4}, {8, 8, 4, 4}};
  std::vector<Action> a(2, Action::AverageParams);
  auto b = plan_buckets(a, r, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].buffer_off, 0);
  EXPECT_EQ(b[0].buffer_n, 8);
  EXPECT_EQ(b[0].bytes(), 4 * 24);
}

// Random action patterns: the buckets cover exactly the layers that sync, once each, with their own action,
// in launch (reverse) order, and a bucket was still under its cap before its last (lowest) layer joined.
TEST(BucketPlan, CoverExactlyTheSyncingLayers) {
  uint64_t s = 12345;
  auto next = [&] { s = s * 6364136223846793005ull + 1442695040888963407ull; return s >> 33; };
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 1 + int(next() % 30);
    std::vector<int64_t> sizes;
    for (int l = 0; l < L; ++l) sizes.push_back(1 + int64_t(next() % 5000));
    auto r = ranges(sizes);
    std::vector<Action> a;
    for (int l = 0; l < L; ++l) a.push_back(Action(next() % 3));
    const int64_t first = 4 * 2000, cap = 4 * 6000;
    auto b = plan_buckets(a, r, first, cap);
    std::vector<int> covered(L, 0);
    int prev_lo = L;
    for (size_t i = 0; i < b.size(); ++i) {
      EXPECT_LT(b[i].hi, prev_lo);
      prev_lo = b[i].lo;
      int64_t n = 0;
      for (int l = b[i].lo; l <= b[i].hi; ++l) {
        ++covered[l];
        EXPECT_EQ(a[l], b[i].action);
        n += sizes[l];
      }
      EXPECT_EQ(n, b[i].param_n);
      EXPECT_EQ(r[b[i].lo].param_off, b[i].param_off);
      if (b[i].lo != b[i].hi) EXPECT_LT(4 * (n - sizes[b[i].lo]), i == 0 ? first : cap);
    }
    for (int l = 0; l < L; ++l) EXPECT_EQ(covered[l], a[l] == Action::None ? 0 : 1) << "layer " << l;
  }
}
