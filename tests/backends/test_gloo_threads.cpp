// Gloo backend with N ranks as threads over a HashStore: collectives exact, split, order, test()/wait().
#include <gtest/gtest.h>

#include "tests/backends/byte_channel_check.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "tests/backends/rank_threads.h"

namespace dd {
namespace {

using test::run_ranks;

class GlooRanks : public ::testing::TestWithParam<int> {};

TEST_P(GlooRanks, AllreduceSumAndAvgAreExact) {
  const int n = GetParam();
  const std::vector<size_t> sizes = {0, 1, 7, 1000, 65537, (1u << 20) + 3};
  auto err = run_ranks(n, [&](int r, Backend& be) {
    ASSERT_EQ(be.rank(), r);
    ASSERT_EQ(be.size(), n);
    ASSERT_EQ(be.name(), "gloo");
    for (size_t count : sizes) {
      std::vector<float> s(count), a(count);
      for (size_t i = 0; i < count; ++i) s[i] = a[i] = static_cast<float>((r + 1) * (i % 13 + 1));
      auto w1 = be.allreduce(s.data(), count, ReduceOp::Sum);
      auto w2 = be.allreduce(a.data(), count, ReduceOp::Avg);
      w1->wait();
      w2->wait();
      for (size_t i = 0; i < count; ++i) {
        const float sum = static_cast<float>(n * (n + 1) / 2 * (i % 13 + 1));
        ASSERT_EQ(s[i], sum) << "count " << count << " i " << i;
        ASSERT_EQ(a[i], sum * (1.0f / n)) << "count " << count << " i " << i;
      }
    }
  });
  EXPECT_EQ(err, "");
}

// run_bytes: all-to-all and all-gather of raw bytes on the communication thread, in order with the float ops.
TEST_P(GlooRanks, ByteChannelAlltoallAndAllgather) {
  auto err = run_ranks(GetParam(), [&](int, Backend& be) { test::check_byte_channel(be); });
  EXPECT_EQ(err, "");
}

TEST_P(GlooRanks, BroadcastFromEveryRoot) {
  const int n = GetParam();
  auto err = run_ranks(n, [&](int r, Backend& be) {
    for (int root = 0; root < n; ++root) {
      std::vector<float> v(1001);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r * 10000 + i);
      be.broadcast(v.data(), v.size(), root)->wait();
      for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(root * 10000 + i));
    }
    EXPECT_THROW(be.broadcast(nullptr, 0, n), UsageError);
  });
  EXPECT_EQ(err, "");
}

TEST_P(GlooRanks, AllgatherBlobsOfDifferentSizes) {
  const int n = GetParam();
  auto err = run_ranks(n, [&](int r, Backend& be) {
    auto all = be.allgather(std::string(r * 3, static_cast<char>('a' + r)));  // rank 0 sends an empty blob
    ASSERT_EQ(static_cast<int>(all.size()), n);
    for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], std::string(q * 3, static_cast<char>('a' + q)));
    auto empty = be.allgather("");
    for (auto& s : empty) EXPECT_EQ(s, "");
  });
  EXPECT_EQ(err, "");
}

TEST_P(GlooRanks, BarrierWaitsForTheLastRank) {
  const int n = GetParam();
  std::atomic<double> late_entry{0};
  std::vector<double> exit_time(n);
  auto err = run_ranks(n, [&](int r, Backend& be) {
    be.barrier();  // align start-up
    if (r == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      late_entry = now_s();
    }
    be.barrier();
    exit_time[r] = now_s();
  });
  ASSERT_EQ(err, "");
  for (int r = 0; r < n; ++r) EXPECT_GE(exit_time[r], late_entry.load()) << "rank " << r << " left the barrier early";
}

TEST_P(GlooRanks, SplitIntoTwoGroupsRunsIndependentCollectives) {
  const int n = GetParam();
  auto err = run_ranks(n, [&](int r, Backend& be) {
    auto g = be.split(r % 2);
    std::vector<int> members;
    for (int q = r % 2; q < n; q += 2) members.push_back(q);
    ASSERT_EQ(g->size(), static_cast<int>(members.size()));
    ASSERT_EQ(g->rank(), r / 2);
    std::vector<float> v(513, static_cast<float>(r + 1)), w(77, 1.0f);
    auto wg = g->allreduce(v.data(), v.size(), ReduceOp::Sum);
    auto wp = be.allreduce(w.data(), w.size(), ReduceOp::Sum);  // parent and child in flight together
    wg->wait();
    wp->wait();
    float expect = 0;
    for (int q : members) expect += q + 1;
    for (float x : v) ASSERT_EQ(x, expect);
    for (float x : w) ASSERT_EQ(x, static_cast<float>(n));
    auto names = g->allgather(std::to_string(r));
    for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(names[i], std::to_string(members[i]));
  });
  EXPECT_EQ(err, "");
}

TEST_P(GlooRanks, AsyncOpsRunInSubmissionOrder) {
  const int n = GetParam();
  auto err = run_ranks(n, [&](int r, Backend& be) {
    // Same buffer, no waits in between: only strict FIFO execution gives (sum of x) * n.
    std::vector<float> v(100003, static_cast<float>(r + 1));
    std::vector<std::vector<float>> others(6, std::vector<float>(4099, 1.0f));
    std::vector<WorkPtr> works;
    works.push_back(be.allreduce(v.data(), v.size(), ReduceOp::Sum));
    for (auto& o : others) works.push_back(be.allreduce(o.data(), o.size(), ReduceOp::Sum));
    works.push_back(be.allreduce(v.data(), v.size(), ReduceOp::Sum));
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();  // wait out of order
    const float expect = static_cast<float>(n * (n + 1) / 2 * n);
    for (float x : v) ASSERT_EQ(x, expect);
    for (auto& o : others)
      for (float x : o) ASSERT_EQ(x, static_cast<float>(n));
    std::vector<float> b(10, static_cast<float>(r));
    auto w1 = be.allreduce(b.data(), b.size(), ReduceOp::Sum);
    auto w2 = be.broadcast(b.data(), b.size(), n - 1);
    w2->wait();
    EXPECT_TRUE(w1->test());  // FIFO: the earlier op is finished once the later one is
    for (float x : b) ASSERT_EQ(x, static_cast<float>(n * (n - 1) / 2));
  });
  EXPECT_EQ(err, "");
}

TEST_P(GlooRanks, TestReportsPendingUntilTheLastRankJoins) {
  const int n = GetParam();
  auto err = run_ranks(n, [&](int r, Backend& be) {
    be.barrier();
    std::vector<float> v(1000, 1.0f);
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto w = be.allreduce(v.data(), v.size(), ReduceOp::Sum);
    if (r != n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_FALSE(w->test()) << "finished before the last rank submitted";
    }
    while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    w->wait();  // returns at once after test() == true
    EXPECT_TRUE(w->test());
    for (float x : v) ASSERT_EQ(x, static_cast<float>(n));
  });
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(World, GlooRanks, ::testing::Values(2, 3, 4));

TEST(GlooSingle, WorldOfOneIsIdentity) {
  BackendOptions o = test::thread_opts();
  o.world = 1;
  auto be = make_gloo_backend(o);  // empty rendezvous + world 1 -> in-process store
  std::vector<float> v = {1.5f, -2.0f, 3.0f};
  be->allreduce(v.data(), v.size(), ReduceOp::Avg)->wait();
  be->broadcast(v.data(), v.size(), 0)->wait();
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(be->allgather("x"), std::vector<std::string>{"x"});
  be->barrier();
  auto g = be->split(7);
  EXPECT_EQ(g->size(), 1);
  be->set_timeout(5);
  EXPECT_EQ(be->timeout(), 5);
  EXPECT_THROW(be->set_timeout(0), UsageError);
}

TEST(GlooSingle, BadRendezvousIsAUsageError) {
  BackendOptions o = test::thread_opts();
  o.world = 2;
  o.rank = 0;
  EXPECT_THROW(make_gloo_backend(o), UsageError);  // no rendezvous for 2 ranks
  o.rendezvous = "ftp://x";
  EXPECT_THROW(make_gloo_backend(o), UsageError);
  o.rendezvous = "file://relative/path";
  EXPECT_THROW(make_gloo_backend(o), UsageError);
  o.rendezvous = "redis://host:notaport";
  EXPECT_THROW(make_gloo_backend(o), UsageError);
}

}  // namespace
}  // namespace dd

namespace dd {
namespace {

TEST(GlooIface, BindsToANamedInterface) {
  BackendOptions o = test::thread_opts();
  o.iface = "lo";
  auto err = test::run_ranks(
      2,
      [](int r, Backend& be) {
        float x = static_cast<float>(r + 1);
        be.allreduce(&x, 1, ReduceOp::Sum)->wait();
        ASSERT_EQ(x, 3.0f);
      },
      o);
  EXPECT_EQ(err, "");
  o.iface = "no-such-if0";
  o.world = 1;
  EXPECT_THROW(make_gloo_backend(o), UsageError);
}

}  // namespace
}  // namespace dd
