// write_summary_json: content round-trips, replaces atomically, and an unwritable directory is a UsageError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "core/telemetry/summary_json.h"
#include "tests/telemetry/test_util.h"

namespace dd::telemetry {
namespace {

TEST(SummaryJson, WritesAndReplaces) {
  testing::ScratchDir dir;
  std::string path = dir.file("summary.json");
  write_summary_json(path, {{"model", "mlp"}, {"samples_per_s", 1234.5}});
  write_summary_json(path, {{"model", "cnn"}, {"world", 4}});
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["model"], "cnn");
  EXPECT_EQ(j["world"], 4);
  EXPECT_FALSE(j.contains("samples_per_s"));
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path)) (void)e, ++files;
  EXPECT_EQ(files, 1) << "temp file left behind";
}

TEST(SummaryJson, UnwritableDirectoryIsAUsageError) {
  EXPECT_THROW(write_summary_json("/nonexistent-dir-dd/summary.json", {{"a", 1}}), dd::UsageError);
}

}  // namespace
}  // namespace dd::telemetry
