// ReachProbe (reach_probe.h): a listening socket that accepts and closes, and a connect with a timeout.
#include "backends/common/reach_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace dd {
namespace {

// The IPv4 address the backend's sockets use: the interface's, else the host name's, else loopback.
in_addr local_address(const std::string& iface_opt) {
  std::string iface = iface_opt;
  if (iface.empty())
    if (const char* e = std::getenv("GLOO_SOCKET_IFNAME")) iface = e;
  in_addr a{};
  a.s_addr = htonl(INADDR_LOOPBACK);
  if (!iface.empty()) {
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) == 0) {
      for (ifaddrs* i = all; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && iface == i->ifa_name) {
          a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
          break;
        }
      freeifaddrs(all);
    }
    return a;
  }
  char host[256] = {0};
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (gethostname(host, sizeof(host) - 1) == 0 && getaddrinfo(host, nullptr, &hints, &res) == 0) {
    a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return a;
}

bool parse(const std::string& address, sockaddr_in* sa) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *sa = sockaddr_in{};
  sa->sin_family = AF_INET;
  char* end = nullptr;
  const long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) return false;
  sa->sin_port = htons(uint16_t(port));
  return inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa->sin_addr) == 1;
}

}  // namespace

ReachProbe::ReachProbe(const std::string& iface) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = local_address(iface);
  sa.sin_port = 0;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof(sa);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd_, 64) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("reach probe: cannot listen: " + why);
  }
  char ip[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
  address_ = std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
  accept_ = std::thread([this] {
    pollfd p{fd_, POLLIN, 0};
    while (!stop_.load())
      if (::poll(&p, 1, 100) > 0) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) ::close(c);
      }
  });
}

ReachProbe::~ReachProbe() {
  stop_ = true;
  if (accept_.joinable()) accept_.join();
  if (fd_ >= 0) ::close(fd_);
}

bool ReachProbe::reaches(const std::string& address, double timeout_s) {
  sockaddr_in sa{};
  if (!parse(address, &sa)) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  if (!ok && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    ok = ::poll(&p, 1, int(timeout_s * 1000)) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
         err == 0;
  }
  ::close(fd);
  return ok;
}

}  // namespace dd
