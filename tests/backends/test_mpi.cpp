// MPI backend under `mpirun -n 2`: collectives exact, split, submission order, blocking ops. Every test is
// collective, so all ranks run the same tests in the same order.
#include <gtest/gtest.h>

#include "tests/backends/byte_channel_check.h"

#include "backends/mpi/mpi_backend.h"
#include "base/error.h"

namespace dd {
namespace {

Backend& world() {
  static std::unique_ptr<Backend> be = [] {
    BackendOptions o;
    o.kind = dd::BackendKind::Mpi;
    o.timeout_s = 30;
    auto info = discover_rank();
    o.rank = info.rank;
    o.world = info.world;
    return make_mpi_backend(o);
  }();
  return *be;
}

TEST(Mpi, RankMatchesEnvironment) {
  auto info = discover_rank();
  EXPECT_EQ(world().rank(), info.rank);
  EXPECT_EQ(world().size(), info.world);
  EXPECT_EQ(world().name(), "mpi");
}

TEST(Mpi, AllreduceSumAndAvgExact) {
  Backend& be = world();
  const int n = be.size(), r = be.rank();
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(100003)}) {
    std::vector<float> s(count), a(count);
    for (size_t i = 0; i < count; ++i) s[i] = a[i] = static_cast<float>((r + 1) * (i % 13 + 1));
    auto w1 = be.allreduce(s.data(), count, ReduceOp::Sum);
    auto w2 = be.allreduce(a.data(), count, ReduceOp::Avg);
    w2->wait();
    EXPECT_TRUE(w1->test());
    for (size_t i = 0; i < count; ++i) {
      const float sum = static_cast<float>(n * (n + 1) / 2 * (i % 13 + 1));
      ASSERT_EQ(s[i], sum);
      ASSERT_EQ(a[i], sum * (1.0f / n));
    }
  }
}

TEST(Mpi, BroadcastAllgatherBarrier) {
  Backend& be = world();
  const int n = be.size(), r = be.rank();
  for (int root = 0; root < n; ++root) {
    std::vector<float> v(999, static_cast<float>(r));
    be.broadcast(v.data(), v.size(), root)->wait();
    for (float x : v) ASSERT_EQ(x, static_cast<float>(root));
  }
  auto all = be.allgather(std::string(r, 'x'));
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], std::string(q, 'x'));
  be.barrier();
}

// run_bytes: all-to-all and all-gather of raw bytes on the communication thread, in order with the float ops.
TEST(Mpi, ByteChannelAlltoallAndAllgather) { test::check_byte_channel(world()); }

TEST(Mpi, SplitAndOrder) {
  Backend& be = world();
  const int r = be.rank();
  auto g = be.split(r);  // every rank alone
  EXPECT_EQ(g->size(), 1);
  EXPECT_EQ(g->rank(), 0);
  std::vector<float> v(50000, 1.0f);
  std::vector<WorkPtr> works;
  for (int k = 0; k < 3; ++k) works.push_back(be.allreduce(v.data(), v.size(), ReduceOp::Sum));
  float solo = 5;
  g->allreduce(&solo, 1, ReduceOp::Sum)->wait();
  EXPECT_EQ(solo, 5.0f);
  works.back()->wait();
  const float n = static_cast<float>(be.size());
  for (float x : v) ASSERT_EQ(x, n * n * n);
}

}  // namespace
}  // namespace dd
