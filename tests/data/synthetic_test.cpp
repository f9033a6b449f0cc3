// Synthetic data, --data dispatch, and gathering samples into batches.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/shuffle.h"

namespace dd::data {
namespace {

TEST(Synthetic, ImagesAreDeterministicUnitVariance) {
  const Dataset a = make_synthetic({1, 28, 28}, false, 10, 500, 7);
  const Dataset b = make_synthetic({1, 28, 28}, false, 10, 500, 7);
  const Dataset c = make_synthetic({1, 28, 28}, false, 10, 500, 8);
  EXPECT_EQ(a.name, "synthetic");
  ASSERT_EQ(a.size, 500);
  ASSERT_EQ(a.xf.size(), size_t(500 * 784));
  ASSERT_EQ(a.y.size(), size_t(500));
  EXPECT_TRUE(a.xi.empty());
  EXPECT_EQ(a.xf, b.xf);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.xf, c.xf);
  double sum = 0, sq = 0;
  for (float v : a.xf) {
    sum += v;
    sq += double(v) * v;
    ASSERT_LE(std::fabs(v), 2.4495f);  // triangular on [-sqrt 6, sqrt 6)
  }
  const double n = double(a.xf.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  std::vector<int> count(10, 0);
  for (int32_t v : a.y) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 10);
    ++count[size_t(v)];
  }
  for (int k = 0; k < 10; ++k) EXPECT_GT(count[size_t(k)], 20) << k;  // all classes occur (expected 50)
}

TEST(Synthetic, Tokens) {
  const Dataset d = make_synthetic({16}, true, 256, 64, 3);
  EXPECT_TRUE(d.tokens);
  EXPECT_EQ(d.target_len, 16);
  ASSERT_EQ(d.xi.size(), size_t(64 * 16));
  ASSERT_EQ(d.y.size(), size_t(64 * 16));
  EXPECT_TRUE(d.xf.empty());
  int32_t lo = 1000, hi = -1;
  for (int32_t v : d.xi) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, 0);
  EXPECT_LT(hi, 256);
  EXPECT_GT(hi - lo, 200);  // 1024 draws cover the byte range
  EXPECT_THROW(make_synthetic({4, 4}, true, 256, 8, 1), dd::UsageError);
  EXPECT_THROW(make_synthetic({16}, true, 256, 0, 1), dd::UsageError);
}

TEST(OpenDataset, DispatchAndRefusals) {
  const InputSpec mlp{"mlp", {1, 28, 28}, false, 10}, gpt{"gpt-mini", {128}, true, 256};
  const Dataset img = open_dataset("synthetic", "", true, mlp, 1);
  EXPECT_EQ(img.x_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(img.num_classes, 10);
  const Dataset tok = open_dataset("synthetic", "", false, gpt, 1);
  EXPECT_EQ(tok.x_shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(tok.num_classes, 256);
  // Train and test synthetic sets differ.
  const Dataset img_test = open_dataset("synthetic", "", false, mlp, 1);
  EXPECT_NE(std::vector<float>(img.xf.begin(), img.xf.begin() + 784),
            std::vector<float>(img_test.xf.begin(), img_test.xf.begin() + 784));
  // The reference models' synthetic sets are those of make_synthetic with derived seeds (unchanged data).
  EXPECT_EQ(img.xf, make_synthetic({1, 28, 28}, false, 10, 10000, derive_seed(1, 1)).xf);
  EXPECT_EQ(tok.xi, make_synthetic({128}, true, 256, 2000, derive_seed(1, 2)).xi);
  EXPECT_THROW(open_dataset("imagenet", "", true, mlp, 1), dd::UsageError);
  EXPECT_THROW(open_dataset("fashion-mnist", "", true, gpt, 1), dd::UsageError);
  EXPECT_THROW(open_dataset("text", "", true, mlp, 1), dd::UsageError);
}

TEST(Gather, CopiesTheIndexedSamples) {
  const Dataset d = make_synthetic({2, 3}, false, 5, 10, 11);
  const int64_t idx[4] = {7, 0, 7, 9};
  Batch b;
  gather(d, idx, 4, &b);
  ASSERT_EQ(b.n, 4);
  ASSERT_EQ(b.xf.size(), size_t(24));
  ASSERT_EQ(b.y.size(), size_t(4));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b.y[size_t(i)], d.y[size_t(idx[i])]);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(b.xf[size_t(i * 6 + k)], d.xf[size_t(idx[i] * 6 + k)]);
  }
  const Dataset t = make_synthetic({5}, true, 256, 10, 11);
  gather_range(t, 3, 2, &b);  // reusing the batch switches it to tokens
  ASSERT_EQ(b.n, 2);
  EXPECT_TRUE(b.xf.empty());
  ASSERT_EQ(b.xi.size(), size_t(10));
  ASSERT_EQ(b.y.size(), size_t(10));
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(b.xi[size_t(k)], t.xi[size_t(15 + k)]);
    EXPECT_EQ(b.y[size_t(k)], t.y[size_t(15 + k)]);
  }
  const int64_t bad = 10;
  EXPECT_ANY_THROW(gather(d, &bad, 1, &b));
}

}  // namespace
}  // namespace dd::data
