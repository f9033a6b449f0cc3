// A private redis-server for rendezvous tests: started on a free loopback port (no persistence), waited for until
// it accepts connections, SIGKILLed with its process group when the object goes away.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "tests/common/child_process.h"
#include "tests/common/tmp_dir.h"

namespace dd::testing_common {

inline constexpr const char* kRedisServer = "/usr/bin/redis-server";

// A loopback port nothing listens on right now.
inline int free_port() {
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

inline bool can_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

class RedisServer {
 public:
  static bool installed() { return access(kRedisServer, X_OK) == 0; }
  RedisServer() : port_(free_port()) {
    server_ = std::make_unique<ChildProcess>(
        kRedisServer,
        std::vector<std::string>{"--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--loglevel", "warning"},
        std::vector<std::string>{}, dir_ / "redis.out", dir_ / "redis.err");
    for (int i = 0; i < 200 && !can_connect(port_); ++i) usleep(25000);
  }
  bool up() const { return can_connect(port_); }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return server_->err(); }

 private:
  TmpDir dir_{"dd-redis"};
  int port_;
  std::unique_ptr<ChildProcess> server_;
};

}  // namespace dd::testing_common
