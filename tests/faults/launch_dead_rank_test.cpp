// `dreamddp launch -n 2 -- train ...` with a rank that dies or hangs: the launcher ends non-zero within
// --timeout + 10 s, names the rank, and leaves no rank process behind.
#include <gtest/gtest.h>

#include "tests/faults/fault_util.h"

namespace dd::faults {
namespace {

struct Launched {
  TmpDir dir;
  std::unique_ptr<ChildProcess> launcher;
  std::vector<pid_t> ranks;  // [rank] = pid, filled by find_ranks()
  explicit Launched(std::vector<std::string> launch_opts) {
    std::vector<std::string> args = {"launch", "-n", "2"};
    args.insert(args.end(), launch_opts.begin(), launch_opts.end());
    args.push_back("--");
    auto t = train_args();
    args.insert(args.end(), t.begin(), t.end());
    launcher = std::make_unique<ChildProcess>(kBin, args, std::vector<std::string>{}, dir / "out", dir / "err");
  }
  ~Launched() {  // a failed test must not leave ranks running (they also die with the launcher: PDEATHSIG)
    for (pid_t p : ranks)
      if (p > 0 && !process_gone(p)) kill(p, SIGKILL);
  }
  void find_ranks() {
    ranks.assign(2, -1);
    for (pid_t c : children_of(launcher->pid()))
      for (int r = 0; r < 2; ++r)
        if (has_env(c, "RANK=" + std::to_string(r))) ranks[r] = c;
    ASSERT_GT(ranks[0], 0) << "rank 0 not found among the launcher's children";
    ASSERT_GT(ranks[1], 0) << "rank 1 not found among the launcher's children";
  }
  void expect_no_leftovers() {
    const double end = mono_s() + 3;
    for (int r = 0; r < 2; ++r) {
      while (!process_gone(ranks[r]) && mono_s() < end) usleep(20000);
      EXPECT_TRUE(process_gone(ranks[r])) << "rank " << r << " (pid " << ranks[r] << ") outlived the launcher";
    }
  }
};

TEST(LaunchDeadRank, KilledRankEndsTheJob) {
  Launched job({});
  ASSERT_TRUE(job.launcher->wait_for_stderr(kTrainingLine, 90)) << job.launcher->err();
  job.find_ranks();
  if (::testing::Test::HasFatalFailure()) return;
  kill(job.ranks[1], SIGKILL);
  const double t0 = mono_s();
  const int st = job.launcher->wait_for(kBoundS);
  ASSERT_NE(st, -1) << "launcher still running " << kBoundS << " s after rank 1 was killed\n" << job.launcher->err();
  EXPECT_LE(mono_s() - t0, kBoundS);
  // The launcher's status is that of the first rank to fail: killed by SIGKILL.
  EXPECT_EQ(st, 128 + SIGKILL) << job.launcher->err();
  EXPECT_NE(job.launcher->err().find("rank 1 (pid " + std::to_string(job.ranks[1]) + ") was killed by signal 9"),
            std::string::npos)
      << job.launcher->err();
  job.expect_no_leftovers();
}

// A stopped rank: rank 0 times out and exits 3, which takes the job down; the stopped rank only dies with
// SIGKILL after the launcher's grace (SIGTERM stays pending in a stopped process), hence a short --grace.
TEST(LaunchDeadRank, HungRankEndsTheJobWith3) {
  Launched job({"--grace", "2"});
  ASSERT_TRUE(job.launcher->wait_for_stderr(kTrainingLine, 90)) << job.launcher->err();
  job.find_ranks();
  if (::testing::Test::HasFatalFailure()) return;
  kill(job.ranks[1], SIGSTOP);
  const double t0 = mono_s();
  const int st = job.launcher->wait_for(kBoundS);
  ASSERT_NE(st, -1) << "launcher still running " << kBoundS << " s after rank 1 was stopped\n"
                    << job.launcher->err();
  EXPECT_LE(mono_s() - t0, kBoundS);
  EXPECT_EQ(st, 3) << job.launcher->err();
  const std::string err = job.launcher->err();
  EXPECT_NE(err.find("lost rank 1 ["), std::string::npos) << err;
  EXPECT_EQ(err.find("terminate called"), std::string::npos) << err;
  job.expect_no_leftovers();
}

}  // namespace
}  // namespace dd::faults
