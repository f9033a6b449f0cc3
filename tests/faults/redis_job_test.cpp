// Jobs sharing one redis-server: redis://host:port/JOB gives each job its own key space; a job that finds an
// earlier job's keys is refused with exit 2 and an actionable message instead of an obscure Gloo failure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include "tests/faults/fault_util.h"

namespace dd::faults {
namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
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
  if (access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "redis-server not installed";
  TmpDir dir;
  const int port = free_port();
  ChildProcess redis("/usr/bin/redis-server",
                     {"--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, {},
                     dir / "redis.out", dir / "redis.err");
  for (int i = 0; i < 200 && !can_connect(port); ++i) usleep(25000);
  ASSERT_TRUE(can_connect(port)) << "redis-server did not start";
  const std::string base = "redis://127.0.0.1:" + std::to_string(port);
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
