// Gloo backend over a RedisStore rendezvous (a private redis-server on a free port; skipped without one).
#include <gtest/gtest.h>

#include <thread>

#include "backends/gloo/gloo_backend.h"
#include "base/error.h"
#include "tests/common/redis_server.h"

namespace dd {
namespace {

using testing_common::free_port;
using testing_common::RedisServer;

TEST(GlooRedis, TwoRanksRendezvousThroughRedis) {
  if (!RedisServer::installed()) GTEST_SKIP() << "redis-server not installed";
  RedisServer redis;
  ASSERT_TRUE(redis.up()) << "redis-server did not start: " << redis.log();
  std::string errors[2];
  float results[2] = {0, 0};
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      try {
        BackendOptions o;
        o.rank = r;
        o.world = 2;
        o.rendezvous = redis.url();
        o.timeout_s = 20;
        o.prefix = "redis-test";
        auto be = make_gloo_backend(o);  // one RedisStore (one connection) per rank
        float x = static_cast<float>(r + 1);
        be->allreduce(&x, 1, ReduceOp::Sum)->wait();
        results[r] = x;
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(results[0], 3.0f);
  EXPECT_EQ(results[1], 3.0f);
}

TEST(GlooRedis, UnreachableRedisIsAUsageError) {
  BackendOptions o;
  o.world = 2;
  o.rendezvous = "redis://127.0.0.1:" + std::to_string(free_port());  // nothing listens there
  EXPECT_THROW(make_gloo_backend(o), UsageError);
}

}  // namespace
}  // namespace dd
