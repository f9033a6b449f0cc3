// Gloo backend: a rank that dies or stalls makes the others fail with PeerLost naming it, within the timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/clock.h"
#include "tests/backends/rank_threads.h"

namespace dd {
namespace {

constexpr double kTimeout = 2.0;
constexpr double kSlack = 4.0;  // post-mortem grace (<= timeout) plus scheduling on a loaded 2-core machine

// Survivors submit one allreduce after the victim is gone or silent; returns what they saw.
struct Seen {
  std::string what;
  double seconds = 0;
  bool peer_lost = false;
  double second_op_seconds = 0;
  bool second_peer_lost = false;
};

void survivor(Backend& be, Seen& seen) {
  std::vector<float> v(1 << 16, 1.0f);
  double t0 = now_s();
  try {
    be.allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
  } catch (const PeerLost& e) {
    seen.peer_lost = true;
    seen.what = e.what();
  }
  seen.seconds = now_s() - t0;
  t0 = now_s();
  try {
    be.allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
  } catch (const PeerLost&) {
    seen.second_peer_lost = true;
  }
  seen.second_op_seconds = now_s() - t0;
}

TEST(GlooDeadPeer, DestroyedRankIsNamedWithinTimeout) {
  const int n = 3, victim = 2;
  std::vector<Seen> seen(n);
  auto err = test::run_ranks(
      n,
      [&](int r, Backend& be) {
        std::vector<float> v(100, 1.0f);
        be.allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
        be.barrier();
        if (r == victim) return;  // run_ranks destroys this rank's backend: its sockets close
        survivor(be, seen[r]);
      },
      test::thread_opts(kTimeout));
  ASSERT_EQ(err, "");
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    EXPECT_TRUE(seen[r].peer_lost) << "rank " << r;
    EXPECT_LT(seen[r].seconds, kTimeout + kSlack) << "rank " << r;
    EXPECT_NE(seen[r].what.find("lost rank 2"), std::string::npos) << seen[r].what;
    EXPECT_EQ(seen[r].what.find("rank 1,"), std::string::npos) << "a live rank was blamed: " << seen[r].what;
    EXPECT_TRUE(seen[r].second_peer_lost) << "rank " << r;
    EXPECT_LT(seen[r].second_op_seconds, 0.5) << "later ops must fail fast";
  }
}

TEST(GlooDeadPeer, StalledRankIsNamedWithinTimeout) {
  const int n = 3, victim = 1;
  std::vector<Seen> seen(n);
  auto err = test::run_ranks(
      n,
      [&](int r, Backend& be) {
        be.barrier();
        if (r == victim) {
          // Alive, connected, but never submits: the others must not hang.
          std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout + kSlack + 1.0));
          return;
        }
        survivor(be, seen[r]);
      },
      test::thread_opts(kTimeout));
  ASSERT_EQ(err, "");
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    EXPECT_TRUE(seen[r].peer_lost) << "rank " << r;
    EXPECT_GE(seen[r].seconds, kTimeout * 0.9) << "gave up before the timeout";
    EXPECT_LT(seen[r].seconds, kTimeout + kSlack) << "rank " << r;
    EXPECT_NE(seen[r].what.find("lost rank 1"), std::string::npos) << seen[r].what;
    EXPECT_TRUE(seen[r].second_peer_lost);
    EXPECT_LT(seen[r].second_op_seconds, 0.5);
  }
}

// Rank 2 waits on rank 0 (a healthy peer), not on the lost rank 1, with a timeout far longer than rank 0's
// post-mortem grace. Rank 0 fails on rank 1 and closes its connections, so rank 2 fails at once, reports, and is not
// named with rank 1 (before, it noticed only at its own timeout and rank 0 blamed "rank 1, rank 2").
TEST(GlooDeadPeer, ASurvivorWaitingOnAnotherSurvivorIsNotBlamed) {
  const int n = 3, victim = 1;
  constexpr double kLongTimeout = 30.0;
  std::vector<Seen> seen(n);
  auto err = test::run_ranks(
      n,
      [&](int r, Backend& be) {
        be.barrier();
        if (r == victim) return;  // its backend is destroyed: its sockets close
        std::vector<float> v(1 << 10, 1.0f);
        if (r == 2) be.set_timeout(kLongTimeout);
        const double t0 = now_s();
        try {
          be.broadcast(v.data(), v.size(), r == 0 ? victim : 0)->wait();  // rank 0 from rank 1, rank 2 from 0
        } catch (const PeerLost& e) {
          seen[r].peer_lost = true;
          seen[r].what = e.what();
        }
        seen[r].seconds = now_s() - t0;
      },
      test::thread_opts(kTimeout));
  ASSERT_EQ(err, "");
  for (int r : {0, 2}) {
    EXPECT_TRUE(seen[r].peer_lost) << "rank " << r;
    EXPECT_NE(seen[r].what.find("lost rank 1 ["), std::string::npos) << "rank " << r << ": " << seen[r].what;
  }
  EXPECT_LT(seen[2].seconds, kTimeout + kSlack) << "rank 2 waited for its own timeout";
}

TEST(GlooDeadPeer, BlockingOpsFailToo) {
  const int n = 2;
  std::string barrier_err;
  double barrier_s = 0;
  auto err = test::run_ranks(
      n,
      [&](int r, Backend& be) {
        be.barrier();
        if (r == 1) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        double t0 = now_s();
        try {
          be.barrier();
        } catch (const PeerLost& e) {
          barrier_err = e.what();
        }
        barrier_s = now_s() - t0;
      },
      test::thread_opts(kTimeout));
  ASSERT_EQ(err, "");
  EXPECT_NE(barrier_err.find("lost rank 1"), std::string::npos) << barrier_err;
  EXPECT_LT(barrier_s, kTimeout + kSlack);
}

}  // namespace
}  // namespace dd
