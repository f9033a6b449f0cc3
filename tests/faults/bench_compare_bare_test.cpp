// `dreamddp bench allreduce --compare-bare`: the bare gloo::allreduce column and JSON fields on two launched
// ranks, consistent with the times they are derived from; refused for other backends.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/faults/fault_util.h"

namespace dd::faults {
namespace {

TEST(BenchCompareBare, TwoRanksReportBareTimeAndOverhead) {
  TmpDir dir;
  ChildProcess p(kBin,
                 {"launch", "-n", "2", "--", "bench", "allreduce", "--backend", "gloo", "--compare-bare", "--sizes",
                  "4K:64K", "--iters", "3", "--warmup", "1", "--timeout", "20"},
                 {}, dir / "out", dir / "err");
  ASSERT_EQ(p.wait_for(90), 0) << p.err();
  const auto out_lines = lines(p.out());
  ASSERT_FALSE(out_lines.empty());
  EXPECT_NE(p.out().find("bare(us)"), std::string::npos) << p.out();
  auto j = nlohmann::json::parse(out_lines.back());
  EXPECT_EQ(j.at("world"), 2);
  ASSERT_EQ(j.at("results").size(), 5u);  // 4K 8K 16K 32K 64K
  for (auto& r : j["results"]) {
    EXPECT_TRUE(r.at("ok").get<bool>());
    const double t = r.at("time_s"), tb = r.at("bare_time_s"), tm = r.at("min_time_s"), tbm = r.at("bare_min_time_s");
    ASSERT_GT(tb, 0);
    ASSERT_GT(tbm, 0);
    EXPECT_LE(tm, t);
    EXPECT_LE(tbm, tb);
    EXPECT_NEAR(r.at("overhead_pct").get<double>(), (t / tb - 1) * 100, 1e-6);
    EXPECT_NEAR(r.at("overhead_min_pct").get<double>(), (tm / tbm - 1) * 100, 1e-6);
  }
}

TEST(BenchCompareBare, RefusedForMpi) {
  TmpDir dir;
  ChildProcess p(kBin, {"bench", "allreduce", "--backend", "mpi", "--compare-bare"}, {}, dir / "out", dir / "err");
  EXPECT_EQ(p.wait_for(30), 2) << p.err();
  EXPECT_NE(p.err().find("--compare-bare"), std::string::npos) << p.err();
}

}  // namespace
}  // namespace dd::faults
