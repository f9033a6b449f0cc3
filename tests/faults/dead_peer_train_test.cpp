// `dreamddp train` with a peer that dies (SIGKILL) or hangs (SIGSTOP) mid-training: every survivor must exit 3
// within --timeout + 10 s with one error line naming the lost rank (docs/cli.md "Exit codes").
#include <gtest/gtest.h>

#include <memory>

#include "tests/faults/fault_util.h"

namespace dd::faults {
namespace {

// `world` ranks started as plain processes (RANK/WORLD_SIZE, FileStore rendezvous), not through launch.
struct Ranks {
  TmpDir dir;
  std::vector<std::unique_ptr<ChildProcess>> p;
  explicit Ranks(int world) {
    for (int r = 0; r < world; ++r)
      p.push_back(std::make_unique<ChildProcess>(
          kBin, [&] {
            auto a = train_args();
            a.insert(a.end(), {"--rendezvous", "file://" + (dir / "rdzv")});
            return a;
          }(),
          std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world)},
          dir / ("out" + std::to_string(r)), dir / ("err" + std::to_string(r))));
  }
  void wait_training() {
    ASSERT_TRUE(p[0]->wait_for_stderr(kTrainingLine, 90)) << "ranks never trained:\n" << p[0]->err();
  }
};

// Injects `sig` into rank 1 of `world` ranks and checks every other rank.
void lose_rank_1(int world, int sig) {
  Ranks ranks(world);
  ranks.wait_training();
  if (::testing::Test::HasFatalFailure()) return;
  ranks.p[1]->signal(sig);
  const double t0 = mono_s();
  for (int r = 0; r < world; ++r) {
    if (r == 1) continue;
    const double left = kBoundS - (mono_s() - t0);
    const int st = ranks.p[r]->wait_for(std::max(0.0, left));
    const double took = mono_s() - t0;
    const std::string who = "rank " + std::to_string(r);
    ASSERT_NE(st, -1) << who << " still running " << kBoundS << " s after rank 1 got signal " << sig
                      << " (a hang)\n" << ranks.p[r]->err();
    EXPECT_EQ(st, 3) << who << " exited " << st << " after " << took << " s:\n" << ranks.p[r]->err();
    EXPECT_LE(took, kBoundS);
    expect_clean_peer_lost(ranks.p[r]->err(), 1, who);
  }
  if (sig == SIGSTOP) {
    ranks.p[1]->signal(SIGKILL);
    EXPECT_EQ(ranks.p[1]->wait_for(10), 128 + SIGKILL);
  }
}

TEST(DeadPeerTrain, KilledRankMakesBothOthersExit3) { lose_rank_1(3, SIGKILL); }

TEST(DeadPeerTrain, HungRankMakesTheOthersExit3) { lose_rank_1(3, SIGSTOP); }

}  // namespace
}  // namespace dd::faults
