// plan_buckets: launch order, contiguity, caps, and breaks at layers that do nothing.
#include <gtest/gtest.h>

#include "core/sync/bucket_plan.h"

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
  // first bucket: layer 4 alone (500 floats = first cap); then 3+2 (700 <= 800), then 1+0 (300).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].lo, 4);
  EXPECT_EQ(b[0].hi, 4);
  EXPECT_EQ(b[1].lo, 2);
  EXPECT_EQ(b[1].hi, 3);
  EXPECT_EQ(b[1].param_off, 300);
  EXPECT_EQ(b[1].param_n, 700);
  EXPECT_EQ(b[2].lo, 0);
  EXPECT_EQ(b[2].param_n, 300);
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
