// Fashion-MNIST reader: the real Debian files, and corrupt fixtures that must fail naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "base/error.h"
#include "core/data/dataset.h"
#include "tests/data/fixtures.h"

namespace dd::data {
namespace {

using testing::TempDir;

bool real_files_present() {
  struct stat st {};
  return stat((std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz").c_str(), &st) == 0;
}

float normalized(int v) { return (float(v) / 255.0f - kFashionMean) / kFashionStd; }

// Runs `f`, expecting a one-line UsageError whose message contains every string of `needles`.
void expect_usage_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected a UsageError mentioning " << needles[0];
  } catch (const dd::UsageError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

TEST(FashionMnist, RealTrainSplit) {
  ASSERT_TRUE(real_files_present()) << "install Debian package dataset-fashion-mnist";
  const auto t0 = std::chrono::steady_clock::now();
  const Dataset d = load_fashion_mnist(kFashionMnistDir, true);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("load_seconds", std::to_string(secs));
  std::printf("train split loaded in %.3f s\n", secs);
  // Timing is reported, not asserted: speed belongs in benchmarks (sanitizer builds on a loaded machine take ~10 s).

  EXPECT_EQ(d.name, "fashion-mnist");
  ASSERT_EQ(d.size, 60000);
  EXPECT_EQ(d.x_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(d.sample_numel(), 784);
  EXPECT_FALSE(d.tokens);
  EXPECT_EQ(d.target_len, 1);
  EXPECT_EQ(d.num_classes, 10);
  ASSERT_EQ(d.xf.size(), size_t(60000) * 784);
  ASSERT_EQ(d.y.size(), size_t(60000));
  EXPECT_TRUE(d.xi.empty());

  // First labels of the published file, and the balanced classes (6000 each).
  const std::vector<int32_t> first = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
  EXPECT_EQ(std::vector<int32_t>(d.y.begin(), d.y.begin() + 10), first);
  std::vector<int> count(10, 0);
  for (int32_t c : d.y) {
    ASSERT_GE(c, 0);
    ASSERT_LT(c, 10);
    ++count[size_t(c)];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(count[size_t(c)], 6000) << "class " << c;

  // Pixels of image 0, row 14, columns 10..19 are 00 00 ed e2 d9 df de db de dd in the file.
  const int raw[10] = {0x00, 0x00, 0xed, 0xe2, 0xd9, 0xdf, 0xde, 0xdb, 0xde, 0xdd};
  for (int k = 0; k < 10; ++k) EXPECT_EQ(d.xf[size_t(14 * 28 + 10 + k)], normalized(raw[k])) << k;

  // The normalization constants are the training set's: the result has mean ~0 and std ~1.
  double sum = 0, sq = 0;
  for (float v : d.xf) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / double(d.xf.size());
  const double sd = std::sqrt(sq / double(d.xf.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(sd, 1.0, 0.005);
}

TEST(FashionMnist, RealTestSplit) {
  ASSERT_TRUE(real_files_present()) << "install Debian package dataset-fashion-mnist";
  const Dataset d = load_fashion_mnist(kFashionMnistDir, false);
  ASSERT_EQ(d.size, 10000);
  ASSERT_EQ(d.xf.size(), size_t(10000) * 784);
  const std::vector<int32_t> first = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  EXPECT_EQ(std::vector<int32_t>(d.y.begin(), d.y.begin() + 10), first);
  std::vector<int> count(10, 0);
  for (int32_t c : d.y) ++count[size_t(c)];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(count[size_t(c)], 1000) << "class " << c;
  float lo = 1e9f, hi = -1e9f;
  for (float v : d.xf) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, normalized(0));
  EXPECT_EQ(hi, normalized(255));
}

TEST(FashionMnist, TinyFixtureRoundTrip) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "train", testing::tiny_fashion(13));
  const Dataset d = load_fashion_mnist(dir.path(), true);
  ASSERT_EQ(d.size, 13);
  for (int s = 0; s < 13; ++s) {
    EXPECT_EQ(d.y[size_t(s)], s % 10);
    for (int k = 0; k < 784; k += 97) EXPECT_EQ(d.xf[size_t(s * 784 + k)], normalized((7 * s + k) % 256));
  }
}

TEST(FashionMnist, UncompressedCopyIsAccepted) {
  TempDir dir;
  const auto t = testing::tiny_fashion(4);
  testing::write_file(dir.file("t10k-images-idx3-ubyte"), t.images);
  testing::write_file(dir.file("t10k-labels-idx1-ubyte"), t.labels);
  const Dataset d = load_fashion_mnist(dir.path(), false);
  EXPECT_EQ(d.size, 4);
  EXPECT_EQ(d.y[3], 3);
}

TEST(FashionMnist, MissingFileNamesIt) {
  TempDir dir;
  const auto t = testing::tiny_fashion(4);
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"), testing::gzip_bytes(t.images));
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-labels-idx1-ubyte.gz"), "dataset-fashion-mnist"});
  expect_usage_error([&] { load_fashion_mnist(dir.file("nowhere"), false); },
                     {"t10k-images-idx3-ubyte.gz"});
}

TEST(FashionMnist, WrongMagicNamesFile) {
  TempDir dir;
  auto t = testing::tiny_fashion(4);
  t.images[3] = 0x01;  // one dimension instead of three
  testing::write_tiny_fashion(dir.path(), "train", t);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "magic"});
  // A labels file where the images belong (magic 0x00000801) is refused too.
  t = testing::tiny_fashion(4);
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"), testing::gzip_bytes(t.labels));
  testing::write_file(dir.file("train-labels-idx1-ubyte.gz"), testing::gzip_bytes(t.labels));
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "magic"});
  // Not gzip and not IDX at all: read as plain bytes, then refused by the magic check.
  testing::write_text(dir.file("train-images-idx3-ubyte.gz"), "<html>404 Not Found</html>");
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "magic"});
}

TEST(FashionMnist, TruncatedDataNamesFile) {
  TempDir dir;
  auto t = testing::tiny_fashion(4);
  t.images.resize(t.images.size() - 300);  // header says 4 images, data holds 3.6
  testing::write_tiny_fashion(dir.path(), "train", t);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "truncated"});
  // Shorter than the header itself.
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"),
                      testing::gzip_bytes(std::vector<uint8_t>(t.images.begin(), t.images.begin() + 6)));
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "header"});
}

TEST(FashionMnist, LongerThanHeaderNamesFile) {
  TempDir dir;
  auto t = testing::tiny_fashion(4);
  t.labels.push_back(1);
  testing::write_tiny_fashion(dir.path(), "train", t);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); }, {dir.file("train-labels-idx1-ubyte.gz")});
}

TEST(FashionMnist, TruncatedGzipNamesFile) {
  TempDir dir;
  const auto t = testing::tiny_fashion(40);
  testing::write_tiny_fashion(dir.path(), "train", t);
  auto gz = testing::gzip_bytes(t.images);
  gz.resize(gz.size() / 2);  // a download cut short
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"), gz);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); }, {dir.file("train-images-idx3-ubyte.gz")});
}

TEST(FashionMnist, BadGzipNamesFile) {
  TempDir dir;
  const auto t = testing::tiny_fashion(40);
  testing::write_tiny_fashion(dir.path(), "train", t);
  // Damage the deflate stream (past the 10-byte gzip header, before the 8-byte trailer).
  auto gz = testing::gzip_bytes(t.images);
  for (size_t i = 20; i < gz.size() - 8; i += 11) gz[i] ^= 0x5A;
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"), gz);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); }, {dir.file("train-images-idx3-ubyte.gz")});
  // Intact data but a wrong CRC in the trailer.
  gz = testing::gzip_bytes(t.labels);
  gz[gz.size() - 6] ^= 0xFF;
  testing::write_file(dir.file("train-images-idx3-ubyte.gz"), testing::gzip_bytes(t.images));
  testing::write_file(dir.file("train-labels-idx1-ubyte.gz"), gz);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); }, {dir.file("train-labels-idx1-ubyte.gz")});
}

TEST(FashionMnist, BadLabelsNameFile) {
  TempDir dir;
  auto t = testing::tiny_fashion(4);
  t.labels.back() = 10;
  testing::write_tiny_fashion(dir.path(), "train", t);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-labels-idx1-ubyte.gz"), "label 10"});
  // Five labels for four images.
  t = testing::tiny_fashion(4);
  testing::write_tiny_fashion(dir.path(), "train", t);
  testing::write_file(dir.file("train-labels-idx1-ubyte.gz"),
                      testing::gzip_bytes(testing::tiny_fashion(5).labels));
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); }, {dir.file("train-labels-idx1-ubyte.gz")});
}

TEST(FashionMnist, WrongImageSizeNamesFile) {
  TempDir dir;
  auto t = testing::tiny_fashion(4);
  t.images = testing::idx_bytes({4, 32, 32}, std::vector<uint8_t>(4 * 32 * 32, 1));
  testing::write_tiny_fashion(dir.path(), "train", t);
  expect_usage_error([&] { load_fashion_mnist(dir.path(), true); },
                     {dir.file("train-images-idx3-ubyte.gz"), "28x28"});
}

}  // namespace
}  // namespace dd::data
