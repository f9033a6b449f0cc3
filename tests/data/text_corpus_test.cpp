// Byte-level text corpus: file selection and order, 90/10 split, windows and shifted targets.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "core/data/dataset.h"
#include "tests/data/fixtures.h"

namespace dd::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Checks every sample of `d` against windows of T+1 bytes of `bytes`, stride T+1.
void expect_windows(const Dataset& d, const std::string& bytes, int64_t T) {
  ASSERT_EQ(d.size, int64_t(bytes.size()) / (T + 1));
  ASSERT_EQ(d.xi.size(), size_t(d.size * T));
  ASSERT_EQ(d.y.size(), size_t(d.size * T));
  for (int64_t s = 0; s < d.size; ++s)
    for (int64_t t = 0; t < T; ++t) {
      ASSERT_EQ(d.xi[size_t(s * T + t)], int32_t(uint8_t(bytes[size_t(s * (T + 1) + t)]))) << s << "," << t;
      ASSERT_EQ(d.y[size_t(s * T + t)], int32_t(uint8_t(bytes[size_t(s * (T + 1) + t + 1)]))) << s << "," << t;
    }
}

TEST(TextCorpus, FixtureOrderSplitAndWindows) {
  TempDir dir;
  const std::string a = "Alpha beta gamma delta.\n%\n", b = "Zeta \xc3\xa9ta theta iota kappa lambda.\n";
  testing::write_text(dir.file("b"), b);
  testing::write_text(dir.file("a"), a);
  testing::write_text(dir.file("a.dat"), std::string("\x00\x00\x00\x02", 4));  // strfile index: skipped
  testing::write_text(dir.file(".hidden"), "not part of the corpus");
  fs::create_symlink("a", dir.file("a.u8"));  // the .u8 twin: must not be read twice
  const std::string corpus = a + b;          // sorted name order
  const size_t split = corpus.size() * 9 / 10;
  const int64_t T = 4;

  const Dataset train = load_text(dir.path(), true, T);
  EXPECT_EQ(train.name, "text");
  EXPECT_TRUE(train.tokens);
  EXPECT_EQ(train.x_shape, (std::vector<int64_t>{T}));
  EXPECT_EQ(train.target_len, T);
  EXPECT_EQ(train.num_classes, 256);
  EXPECT_TRUE(train.xf.empty());
  expect_windows(train, corpus.substr(0, split), T);

  const Dataset test = load_text(dir.path(), false, 2);
  expect_windows(test, corpus.substr(split), 2);
  EXPECT_EQ(test.size, int64_t(corpus.size() - split) / 3);

  // A single file works as a corpus too.
  const Dataset one = load_text(dir.file("b"), true, 3);
  expect_windows(one, b.substr(0, b.size() * 9 / 10), 3);
}

TEST(TextCorpus, ErrorsNameTheProblem) {
  TempDir dir;
  try {
    load_text(dir.file("missing"), true, 8);
    FAIL() << "no exception";
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fortunes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_text(dir.path(), true, 8), dd::UsageError);  // empty folder
  testing::write_text(dir.file("tiny"), "0123456789");
  EXPECT_THROW(load_text(dir.path(), false, 8), dd::UsageError);  // 1-byte test split < one window
  EXPECT_THROW(load_text(dir.path(), true, 0), dd::UsageError);
}

TEST(TextCorpus, RealFortunes) {
  ASSERT_TRUE(fs::is_directory(kTextDir)) << "install Debian package fortunes";
  // Independent recount of the corpus: regular non-.dat files.
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(kTextDir))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") total += e.file_size();
  ASSERT_GT(total, uint64_t(1) << 20) << "expected the full fortunes package (~2.6 MB)";
  const int64_t T = 128;
  const Dataset train = load_text(kTextDir, true, T);
  const Dataset test = load_text(kTextDir, false, T);
  EXPECT_EQ(train.size, int64_t(total * 9 / 10) / (T + 1));
  EXPECT_EQ(test.size, int64_t(total - total * 9 / 10) / (T + 1));
  ASSERT_EQ(train.xi.size(), size_t(train.size * T));
  ASSERT_EQ(train.y.size(), size_t(train.size * T));
  // Targets are the inputs shifted by one inside each window.
  for (int64_t s = 0; s < train.size; ++s)
    for (int64_t t = 0; t + 1 < T; ++t) ASSERT_EQ(train.y[size_t(s * T + t)], train.xi[size_t(s * T + t + 1)]);
  // Real English text: almost every byte is printable ASCII or whitespace.
  int64_t printable = 0;
  for (int32_t v : train.xi) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 256);
    printable += (v >= 32 && v < 127) || v == '\n' || v == '\t';
  }
  EXPECT_GT(double(printable) / double(train.xi.size()), 0.99);
}

}  // namespace
}  // namespace dd::data
