// Units of elastic training (docs/elastic.md): the data order continued at a sample position on another world
// size.
#include <gtest/gtest.h>

#include <vector>

#include "core/data/sharder.h"

namespace {

using dd::data::Sharder;

// After continue_at(s, P), step s + k of rank r reads positions P + k*N*b + r*b ..., the same samples one process
// reads from position P on: the order carries over, only the world size changes.
TEST(ElasticSharder, ContinuesAtThePositionOnAnotherWorld) {
  const int64_t size = 37, b = 4, P = 2 * 2 * b * 5;  // a 2-rank run stopped after step 4 (5 steps of 2*4)
  Sharder one(size, 7, 1, 0, 1);
  for (int N : {1, 3, 5}) {
    for (int r = 0; r < N; ++r) {
      Sharder s(size, 7, N, r, b);
      s.continue_at(5, P);
      EXPECT_EQ(s.position_of(5), P);
      EXPECT_EQ(s.position_of(8), P + 3 * N * b);
      for (int64_t step = 5; step < 12; ++step) {
        const auto got = s.batch(step);
        for (int64_t i = 0; i < b; ++i)
          ASSERT_EQ(got[size_t(i)], one.sample_at(P + (step - 5) * N * b + r * b + i)) << N << " " << r << " " << step;
      }
    }
  }
}

TEST(ElasticSharder, PlainOrderWithoutOrigin) {
  Sharder s(50, 3, 2, 1, 4);
  Sharder t(50, 3, 2, 1, 4);
  t.continue_at(0, 0);
  for (int64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(s.position_of(step), step * 8);
    EXPECT_EQ(s.batch(step), t.batch(step));
  }
}

}  // namespace
