// `dreamddp schedule` driven through cmd_schedule: table + last-line JSON, --out file, --fillin, usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "app/commands.h"

namespace fs = std::filesystem;

namespace {

const std::string kProfile = std::string(DREAMDDP_PROFILES_DIR) + "/gpt2_8_10gbit";

// Runs `dreamddp schedule ARGS...` and returns its stdout.
std::string run_schedule(std::vector<std::string> args) {
  args.insert(args.begin(), "schedule");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  try {
    int rc = dd::cli::cmd_schedule(static_cast<int>(argv.size()), argv.data());
    std::cout.rdbuf(old);
    EXPECT_EQ(rc, 0);
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  return captured.str();
}

nlohmann::json last_line_json(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end - start));
}

fs::path fresh_path(const std::string& tag) {
  static int counter = 0;
  fs::path f = fs::temp_directory_path() /
               ("dd_sched_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".json");
  fs::remove(f);
  return f;
}

}  // namespace

TEST(ScheduleCmd, PrintsTableAndLastLineJson) {
  const std::string out = run_schedule({"--profile", kProfile, "--h", "10"});
  EXPECT_NE(out.find("gpt2_8_10gbit"), std::string::npos);
  EXPECT_NE(out.find("lower bound"), std::string::npos);
  EXPECT_NE(out.find("transformer.wte"), std::string::npos);
  const auto j = last_line_json(out);
  EXPECT_NEAR(j.at("ddp").get<double>(), 0.2996, 1e-4);
  EXPECT_NEAR(j.at("localsgd").get<double>(), 0.0945, 1e-4);
  EXPECT_LE(j.at("dreamddp").get<double>(), 0.0771);
  EXPECT_LT(j.at("dreamddp").get<double>(), j.at("plsgd").get<double>());
  EXPECT_LE(j.at("lower_bound").get<double>(), j.at("dreamddp").get<double>());
}

TEST(ScheduleCmd, WritesScheduleFileInForwardOrderAndRefusesOverwrite) {
  const fs::path f = fresh_path("out");
  run_schedule({"--profile", kProfile, "--h", "10", "--out", f.string()});
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(f));
  EXPECT_EQ(j.at("H").get<int>(), 10);
  const auto& s = j.at("schedule");
  ASSERT_EQ(s.size(), 125u);
  EXPECT_EQ(s.begin().key(), "transformer.wte");
  for (auto it = s.begin(); it != s.end(); ++it) {
    EXPECT_GE(it.value().get<int>(), 0);
    EXPECT_LT(it.value().get<int>(), 10);
  }
  EXPECT_FALSE(j.contains("fillin"));
  EXPECT_THROW(run_schedule({"--profile", kProfile, "--h", "10", "--out", f.string()}), dd::UsageError);
  fs::remove(f);
}

TEST(ScheduleCmd, FillInIsWrittenAndDoesNotSlowDown) {
  const fs::path f = fresh_path("fill");
  const auto plain = last_line_json(run_schedule({"--profile", kProfile, "--h", "10"}));
  const auto with = last_line_json(run_schedule({"--profile", kProfile, "--h", "10", "--fillin", "--out", f.string()}));
  EXPECT_LE(with.at("dreamddp").get<double>(), plain.at("dreamddp").get<double>());
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(f));
  ASSERT_TRUE(j.contains("fillin"));
  for (auto it = j["fillin"].begin(); it != j["fillin"].end(); ++it) {
    ASSERT_TRUE(it.value().is_array());
    for (auto& p : it.value()) EXPECT_NE(p.get<int>(), j["schedule"][it.key()].get<int>());
  }
  fs::remove(f);
}

TEST(ScheduleCmd, DelayModelsBothDelayedPolicies) {
  // --delay T: dreamddp:h=H,delay=T and localsgd:k=H,delay=T on a channel across iterations (printed as backward +
  // exposed communication, forward and update taken out). Neither is slower than its in-step (blocking)
  // counterpart, and neither beats the channel: per iteration at least max(B, C/H - forward - update).
  const int H = 10;
  const double fwd = 0.020, upd = 0.005;
  const auto plain = last_line_json(run_schedule({"--profile", kProfile, "--h", std::to_string(H)}));
  const auto j = last_line_json(run_schedule({"--profile", kProfile, "--h", std::to_string(H), "--delay", "3",
                                              "--forward-ms", "20", "--update-ms", "5"}));
  ASSERT_TRUE(j.contains("dreamddp_delay"));
  ASSERT_TRUE(j.contains("localsgd_delay"));
  // ddp = B + C and localsgd = B + C/H give the profile's B and C.
  const double ddp = plain.at("ddp").get<double>(), local = plain.at("localsgd").get<double>();
  const double C = (ddp - local) * H / (H - 1), B = ddp - C;
  const double floor = std::max(B, C / H - fwd - upd);
  for (const char* k : {"dreamddp_delay", "localsgd_delay"}) EXPECT_GE(j.at(k).get<double>(), floor * (1 - 1e-9)) << k;
  EXPECT_LE(j.at("localsgd_delay").get<double>(), local * (1 + 1e-12));
  EXPECT_LE(j.at("dreamddp_delay").get<double>(), plain.at("dreamddp").get<double>() * (1 + 1e-12));
  EXPECT_THROW(run_schedule({"--profile", kProfile, "--h", std::to_string(H), "--delay", std::to_string(H)}),
               dd::UsageError);
}

TEST(ScheduleCmd, BadUsageIsUsageError) {
  EXPECT_THROW(run_schedule({"--profile", kProfile, "--h", "0"}), dd::UsageError);
  EXPECT_THROW(run_schedule({"--profile", kProfile}), dd::UsageError);
  EXPECT_THROW(run_schedule({"--h", "4"}), dd::UsageError);
  EXPECT_THROW(run_schedule({"--profile", "/nonexistent/profile", "--h", "4"}), dd::UsageError);
  EXPECT_THROW(run_schedule({"--profile", kProfile, "--h", "four"}), dd::UsageError);
  EXPECT_THROW(run_schedule({"--profile", kProfile, "--h", "4", "--bogus"}), dd::UsageError);
}
