// NCCL backend on one process (needs a GPU; skipped otherwise): allreduce, broadcast, order, usage errors.
#include <gtest/gtest.h>

#include "backends/nccl/nccl_backend.h"
#include "base/error.h"

namespace dd {
namespace {

std::unique_ptr<Backend> single() {
  BackendOptions o;
  o.kind = dd::BackendKind::Nccl;
  o.world = 1;
  o.timeout_s = 30;
  return make_nccl_backend(o);
}

TEST(Nccl, NoGpuIsAUsageError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(single(), UsageError);
}

TEST(Nccl, SingleRankCollectivesOnDevice) {
  if (cuda_device_count() <= 0) GTEST_SKIP() << "no CUDA device";
  auto be = single();
  EXPECT_EQ(be->name(), "nccl");
  const size_t n = 100003;
  std::vector<float> h(n), back(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 17);
  float* d = cuda_alloc_floats(n);
  cuda_copy_to_device(d, h.data(), n);
  auto w1 = be->allreduce(d, n, ReduceOp::Sum);
  auto w2 = be->allreduce(d, n, ReduceOp::Avg);
  auto w3 = be->broadcast(d, n, 0);
  w3->wait();
  EXPECT_TRUE(w1->test());
  EXPECT_TRUE(w2->test());
  cuda_copy_to_host(back.data(), d, n);
  cuda_free(d);
  EXPECT_EQ(back, h);
  EXPECT_EQ(be->allgather("z"), std::vector<std::string>{"z"});
  be->barrier();
  auto g = be->split(0);
  EXPECT_EQ(g->size(), 1);
}

}  // namespace
}  // namespace dd
