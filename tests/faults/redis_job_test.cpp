// Jobs sharing one redis-server: redis://host:port/JOB gives each job its own key space; a job that finds an
// earlier job's keys is refused with exit 2 and an actionable message instead of an obscure Gloo failure.
#include <gtest/gtest.h>

#include "tests/common/redis_server.h"
#include "tests/faults/fault_util.h"

namespace dd::faults {
namespace {

// Two ranks of a tiny bench on `url`; returns both exit statuses, stderr of rank 0 in *err0.
std::vector<int> two_ranks(const TmpDir& dir, const std::string& url, const std::string& tag, std::string* err0) {
  std::vector<std::unique_ptr<ChildProcess>> p;
  for (int r = 0; r < 2; ++r)
    p.push_back(std::make_unique<ChildProcess>(
        kBin,
        std::vector<std::string>{"bench", "allreduce", "--backend", "gloo", "--sizes", "4K", "--iters", "1",
                                 "--warmup", "0", "--timeout", "10", "--iface", "lo", "--rendezvous", url},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=2"},
        dir / (tag + "out" + std::to_string(r)), dir / (tag + "err" + std::to_string(r))));
  std::vector<int> st;
  for (auto& c : p) st.push_back(c->wait_for(60));
  *err0 = p[0]->err();
  return st;
}

TEST(RedisJob, JobsGetTheirOwnKeySpaceAndStaleKeysAreRefused) {
  if (!testing_common::RedisServer::installed()) GTEST_SKIP() << "redis-server not installed";
  TmpDir dir;
  testing_common::RedisServer redis;
  ASSERT_TRUE(redis.up()) << "redis-server did not start: " << redis.log();
  const std::string base = redis.url();
  std::string err;
  EXPECT_EQ(two_ranks(dir, base + "/job-a", "a", &err), (std::vector<int>{0, 0})) << err;
  EXPECT_EQ(two_ranks(dir, base + "/job-b", "b", &err), (std::vector<int>{0, 0})) << err;
  // job-a's keys are still there: refused, not hung, not a Gloo enforce failure with exit 1.
  EXPECT_EQ(two_ranks(dir, base + "/job-a", "a2", &err), (std::vector<int>{2, 2})) << err;
  EXPECT_NE(err.find("already holds keys of an earlier job"), std::string::npos) << err;
  EXPECT_EQ(two_ranks(dir, base + "/bad$job", "c", &err), (std::vector<int>{2, 2})) << err;
  EXPECT_NE(err.find("job name"), std::string::npos) << err;
}

}  // namespace
}  // namespace dd::faults
