// Which data fits which model shape (check_fits, open_dataset), synthetic data of any shape, and the sharding rule
// for the new shapes: N ranks with batch b gather exactly the samples (and numbers) of one process with N*b.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/sharder.h"
#include "tests/data/fixtures.h"

namespace dd::data {
namespace {

using testing::TempDir;

InputSpec images(std::vector<int64_t> shape, int64_t classes, const std::string& model = "test-images") {
  return {model, std::move(shape), false, classes};
}
InputSpec tokens(int64_t ctx, int64_t vocab, const std::string& model = "test-tokens") {
  return {model, {ctx}, true, vocab};
}

// `f` throws one UsageError line containing every needle.
void expect_refusal(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected a refusal naming " << needles[0];
  } catch (const dd::UsageError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(CheckFits, WhatFitsIsAccepted) {
  EXPECT_NO_THROW(check_fits("fashion-mnist", images({1, 28, 28}, 10)));
  EXPECT_NO_THROW(check_fits("fashion-mnist", images({3, 32, 32}, 10)));
  EXPECT_NO_THROW(check_fits("fashion-mnist", images({3, 64, 64}, 1000)));  // labels 0..9 lie below 1000
  EXPECT_NO_THROW(check_fits("fashion-mnist", images({3, 28, 28}, 10)));
  EXPECT_NO_THROW(check_fits("text", tokens(128, 256)));
  EXPECT_NO_THROW(check_fits("text", tokens(1024, 50257)));
  EXPECT_NO_THROW(check_fits("text", tokens(7, 32000)));
  EXPECT_NO_THROW(check_fits("synthetic", images({3, 17, 9}, 3)));
  EXPECT_NO_THROW(check_fits("synthetic", images({1, 28, 28}, 10)));
  EXPECT_NO_THROW(check_fits("synthetic", tokens(64, 100)));
  EXPECT_NO_THROW(check_fits("synthetic", tokens(2048, 50257)));
}

TEST(CheckFits, MisfitsAreRefusedNamingDataAndModel) {
  expect_refusal([] { check_fits("fashion-mnist", tokens(128, 256, "gpt-mini")); },
                 {"--data fashion-mnist", "--model gpt-mini", "tokens", "images"});
  expect_refusal([] { check_fits("text", images({1, 28, 28}, 10, "mlp")); }, {"--data text", "--model mlp"});
  expect_refusal([] { check_fits("text", tokens(128, 255, "tiny")); }, {"--model tiny", "255", "256"});
  expect_refusal([] { check_fits("fashion-mnist", images({1, 32, 32}, 10)); }, {"1x32x32", "1x28x28"});
  expect_refusal([] { check_fits("fashion-mnist", images({2, 28, 28}, 10)); }, {"2x28x28"});
  expect_refusal([] { check_fits("fashion-mnist", images({784}, 10)); }, {"784"});
  expect_refusal([] { check_fits("fashion-mnist", images({3, 32, 32}, 9)); }, {"9 classes", "10 classes"});
  expect_refusal([] { check_fits("imagenet", images({3, 32, 32}, 10)); }, {"imagenet"});
  expect_refusal([] { check_fits("synthetic", images({3, 0, 32}, 10)); }, {"3x0x32"});
  expect_refusal([] { check_fits("synthetic", images({3, 32, 32}, 0)); }, {"0 classes"});
  expect_refusal([] { check_fits("synthetic", images({1 << 20, 1 << 20}, 10)); }, {"1048576x1048576"});
  // open_dataset checks before it reads anything: no such folder is ever looked at.
  expect_refusal([] { open_dataset("text", "/nonexistent", true, tokens(16, 100), 1); }, {"256"});
}

TEST(OpenDataset, SyntheticImagesOfTheModelsShape) {
  const InputSpec m = images({3, 8, 5}, 7);
  const Dataset a = open_dataset("synthetic", "", true, m, 3), b = open_dataset("synthetic", "", true, m, 3);
  const Dataset other = open_dataset("synthetic", "", true, m, 4), test = open_dataset("synthetic", "", false, m, 3);
  EXPECT_EQ(a.x_shape, m.x_shape);
  EXPECT_FALSE(a.tokens);
  EXPECT_EQ(a.size, 10000);
  EXPECT_EQ(test.size, 2000);
  ASSERT_EQ(a.xf.size(), size_t(10000 * 120));
  EXPECT_EQ(a.xf, b.xf);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.xf, other.xf);
  EXPECT_NE(std::vector<float>(a.xf.begin(), a.xf.begin() + 120), std::vector<float>(test.xf.begin(), test.xf.begin() + 120));
  std::set<int32_t> labels(a.y.begin(), a.y.end());
  EXPECT_EQ(labels, (std::set<int32_t>{0, 1, 2, 3, 4, 5, 6}));  // [0, classes), all of them
}

TEST(OpenDataset, SyntheticTokensForAnyVocabularyAndContext) {
  for (const auto& [ctx, vocab] : std::vector<std::pair<int64_t, int64_t>>{{64, 50257}, {5, 100}, {33, 256}}) {
    const Dataset d = open_dataset("synthetic", "", true, tokens(ctx, vocab), 9);
    EXPECT_TRUE(d.tokens);
    EXPECT_EQ(d.x_shape, std::vector<int64_t>{ctx});
    EXPECT_EQ(d.target_len, ctx);
    EXPECT_EQ(d.num_classes, vocab);
    ASSERT_EQ(d.xi.size(), size_t(d.size * ctx));
    const auto [lo, hi] = std::minmax_element(d.xi.begin(), d.xi.end());
    const auto [ylo, yhi] = std::minmax_element(d.y.begin(), d.y.end());
    EXPECT_GE(*lo, 0);
    EXPECT_GE(*ylo, 0);
    EXPECT_LT(*hi, vocab);
    EXPECT_LT(*yhi, vocab);
    EXPECT_GE(*hi, vocab - 1 - vocab / 100) << "draws cover the vocabulary";  // 50,000 draws or more
    EXPECT_EQ(d.xi, open_dataset("synthetic", "", true, tokens(ctx, vocab), 9).xi);
  }
}

TEST(OpenDataset, SyntheticSplitsOfLargeSamplesAreCutToTheBudget) {
  EXPECT_EQ(synthetic_size(images({1, 28, 28}, 10), true), 10000);
  EXPECT_EQ(synthetic_size(tokens(128, 50257), true), 10000);
  const InputSpec big = images({3, 224, 224}, 1000);  // 602,116 bytes a sample
  EXPECT_EQ(synthetic_size(big, true), (int64_t(512) << 20) / 602116);
  EXPECT_EQ(synthetic_size(big, false), (int64_t(128) << 20) / 602116);
  EXPECT_EQ(synthetic_size(images({3, 8192, 8192}, 10), true), 1);
}

TEST(OpenDataset, TextForLargeVocabulariesAndAnyContext) {
  TempDir dir;
  std::string corpus;
  for (int i = 0; i < 300; ++i) corpus += char(i % 256);
  testing::write_text(dir.file("c"), corpus);
  for (int64_t ctx : {1, 4, 31}) {
    const Dataset d = open_dataset("text", dir.path(), true, tokens(ctx, 50257), 1);
    EXPECT_EQ(d.x_shape, std::vector<int64_t>{ctx});
    EXPECT_EQ(d.size, 270 / (ctx + 1));
    EXPECT_EQ(d.num_classes, 256);  // byte ids, valid in any vocabulary of 256 or more
    EXPECT_EQ(d.xi[0], 0);
    EXPECT_EQ(d.y[0], 1);
  }
}

TEST(OpenDataset, FashionMnistForAThreeChannelModel) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "train", testing::tiny_fashion(6));
  testing::write_tiny_fashion(dir.path(), "t10k", testing::tiny_fashion(3));
  const Dataset d = open_dataset("fashion-mnist", dir.path(), true, images({3, 32, 32}, 10), 1);
  EXPECT_EQ(d.x_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(d.size, 6);
  EXPECT_EQ(open_dataset("fashion-mnist", dir.path(), false, images({3, 32, 32}, 10), 1).size, 3);
  expect_refusal([&] { open_dataset("fashion-mnist", dir.path(), true, tokens(128, 256), 1); }, {"tokens"});
}

// The data of a global batch: what N ranks with batch b gather, concatenated in rank order, is exactly what one
// process with batch N*b gathers, for every step (several epochs) and for image, replicated-image and token sets.
void expect_sharding_exact(const Dataset& d, int world, int64_t b, uint64_t seed) {
  const Sharder single(d.size, seed, 1, 0, world * b);
  std::vector<Sharder> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(d.size, seed, world, r, b);
  std::vector<int64_t> idx(size_t(world * b));
  Batch whole, part;
  const int64_t steps = 2 * d.size / (world * b) + 2;
  for (int64_t t = 0; t < steps; ++t) {
    single.indices(t, idx.data());
    gather(d, idx.data(), world * b, &whole);
    const int64_t xn = d.sample_numel() * b, yn = d.target_len * b;
    for (int r = 0; r < world; ++r) {
      ranks[size_t(r)].indices(t, idx.data());
      gather(d, idx.data(), b, &part);
      if (d.tokens)
        ASSERT_TRUE(std::equal(part.xi.begin(), part.xi.end(), whole.xi.begin() + r * xn)) << t << " " << r;
      else
        ASSERT_TRUE(std::equal(part.xf.begin(), part.xf.end(), whole.xf.begin() + r * xn)) << t << " " << r;
      ASSERT_TRUE(std::equal(part.y.begin(), part.y.end(), whole.y.begin() + r * yn)) << t << " " << r;
      ASSERT_EQ(part.xf.size() + part.xi.size(), size_t(xn));
    }
  }
}

TEST(Sharding, ExactForTheNewShapes) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "train", testing::tiny_fashion(23));
  expect_sharding_exact(load_fashion_mnist(dir.path(), true, {3, 32, 32}), 4, 3, 5);
  expect_sharding_exact(make_synthetic({3, 6, 6}, false, 100, 29, 2), 3, 4, 6);
  expect_sharding_exact(make_synthetic({12}, true, 50257, 31, 2), 2, 5, 7);
}

}  // namespace
}  // namespace dd::data
