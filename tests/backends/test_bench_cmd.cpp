// `dreamddp bench allreduce`: table + last-line JSON on one process and on two processes (FileStore), usage errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "app/commands.h"
#include "tests/backends/spawn_ranks.h"

namespace dd {
namespace {

int bench(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return cli::cmd_bench(static_cast<int>(argv.size()), argv.data());
}

void clear_rank_env() {
  for (auto v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                 "SLURM_NTASKS", "DREAMDDP_RENDEZVOUS"})
    unsetenv(v);
}

nlohmann::json last_line_json(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

void check_summary(const nlohmann::json& j, int world, std::vector<size_t> bytes) {
  EXPECT_EQ(j.at("backend"), "gloo");
  EXPECT_EQ(j.at("world"), world);
  ASSERT_EQ(j.at("results").size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto& r = j["results"][i];
    EXPECT_EQ(r.at("bytes").get<size_t>(), bytes[i]);
    EXPECT_TRUE(r.at("ok").get<bool>());
    double t = r.at("time_s"), a = r.at("algbw_GBps"), b = r.at("busbw_GBps");
    EXPECT_GT(t, 0);
    EXPECT_NEAR(a, bytes[i] / t / 1e9, 1e-9 * std::max(1.0, a));
    EXPECT_NEAR(b, world > 1 ? a * 2.0 * (world - 1) / world : 0.0, 1e-9 * std::max(1.0, a));
  }
}

TEST(BenchCmd, SingleProcessTableAndJson) {
  clear_rank_env();
  testing::internal::CaptureStdout();
  int rc = bench({"bench", "allreduce", "--backend", "gloo", "--sizes", "1K:8K", "--iters", "3", "--warmup=1"});
  std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("busbw(GB/s)"), std::string::npos) << out;
  check_summary(last_line_json(out), 1, {1024, 2048, 4096, 8192});
}

TEST(BenchCmd, TwoProcessesOverFileStoreFromEnvironment) {
  clear_rank_env();
  auto base = std::filesystem::temp_directory_path() / ("dd-bench-" + std::to_string(getpid()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  const std::string out_file = (base / "rank0.txt").string();
  auto st = test::fork_ranks(
      2,
      [&](int r) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("DREAMDDP_RENDEZVOUS", ("file://" + (base / "rdzv").string()).c_str(), 1);
        if (!std::freopen(r == 0 ? out_file.c_str() : "/dev/null", "w", stdout)) return 30;
        return bench({"bench", "allreduce", "--sizes", "4K:64K", "--iters", "2", "--warmup", "1", "--timeout", "20"});
      },
      60);
  ASSERT_EQ(st, (std::vector<int>{0, 0}));
  std::ifstream in(out_file);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  check_summary(last_line_json(out), 2, {4096, 8192, 16384, 32768, 65536});
  std::filesystem::remove_all(base);
}

TEST(BenchCmd, UsageErrors) {
  clear_rank_env();
  EXPECT_THROW(bench({"bench"}), UsageError);
  EXPECT_THROW(bench({"bench", "alltoall"}), UsageError);
  EXPECT_THROW(bench({"bench", "allreduce", "--sizes", "8K:1K"}), UsageError);
  EXPECT_THROW(bench({"bench", "allreduce", "--sizes", "abc"}), UsageError);
  EXPECT_THROW(bench({"bench", "allreduce", "--iters", "0"}), UsageError);
  EXPECT_THROW(bench({"bench", "allreduce", "--backend", "tcp"}), UsageError);
  EXPECT_THROW(bench({"bench", "allreduce", "--frobnicate", "1"}), UsageError);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  try {
    bench({"bench", "allreduce"});
    ADD_FAILURE() << "two ranks without a rendezvous must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--rendezvous"), std::string::npos) << e.what();
  }
  clear_rank_env();
}

}  // namespace
}  // namespace dd
