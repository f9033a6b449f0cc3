// Reachability on the ranks' own network, apart from the rendezvous store: a partition can cut a rank's link while
// the store (a file system, or a Redis server on another network) stays reachable, and the store alone cannot tell
// such a rank from a slow one. A ReachProbe listens on the interface the backend binds (--iface, else
// GLOO_SOCKET_IFNAME, else the host name's address, as Gloo picks it) and answers every connection; reaches() opens
// one to another rank's probe within a timeout. The shrink agreement (core/train/elastic.h) uses it to fence out a
// member none of the others reach.
#pragma once
#include <atomic>
#include <string>
#include <thread>

namespace dd {

class ReachProbe {
 public:
  // Throws std::runtime_error when no socket can be bound there.
  explicit ReachProbe(const std::string& iface);
  ~ReachProbe();
  ReachProbe(const ReachProbe&) = delete;
  ReachProbe& operator=(const ReachProbe&) = delete;
  // "a.b.c.d:port", what the other ranks connect to.
  const std::string& address() const { return address_; }
  // True when a TCP connection to `address` ("a.b.c.d:port") opens within timeout_s.
  static bool reaches(const std::string& address, double timeout_s);

 private:
  int fd_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread accept_;
};

}  // namespace dd
