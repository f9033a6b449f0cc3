// Gloo backend over a RedisStore rendezvous (a private redis-server on a free port; skipped without one).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "backends/gloo/gloo_backend.h"
#include "core/common/error.h"

namespace dd {
namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool can_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

TEST(GlooRedis, TwoRanksRendezvousThroughRedis) {
  if (access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  pid_t pid = fork();
  if (pid == 0) {
    std::string p = std::to_string(port);
    execl("/usr/bin/redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--loglevel", "warning", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 200 && !can_connect(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(can_connect(port)) << "redis-server did not start";
  std::string errors[2];
  float results[2] = {0, 0};
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      try {
        BackendOptions o;
        o.rank = r;
        o.world = 2;
        o.rendezvous = "redis://127.0.0.1:" + std::to_string(port);
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
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
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
