// gloo_settings: bind address, timeouts, SIGPIPE and the all-reduce algorithm of the Gloo backend.
#include "backends/gloo/gloo_settings.h"

#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "base/error.h"

namespace dd::gloo_settings {

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g s", s);
  return b;
}

std::chrono::milliseconds to_ms(double s) {
  return std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(std::llround(s * 1000.0))));
}

gloo::transport::tcp::attr bind_attr(const std::string& iface_opt, int world) {
  gloo::transport::tcp::attr attr;
  std::string iface = iface_opt;
  if (iface.empty()) {
    if (const char* e = std::getenv("GLOO_SOCKET_IFNAME")) iface = e;
  }
  if (!iface.empty()) {
    // Checked here: Gloo's own failure path for an unknown interface leaks and says less.
    if (if_nametoindex(iface.c_str()) == 0)
      throw UsageError("gloo: network interface '" + iface + "' does not exist (--iface / GLOO_SOCKET_IFNAME)");
    attr.iface = iface;
    return attr;
  }
  attr.hostname = "127.0.0.1";
  if (world > 1) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) == 0) {
      addrinfo hints{}, *res = nullptr;
      hints.ai_socktype = SOCK_STREAM;
      if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
        attr.hostname = host;
        freeaddrinfo(res);
      }
    }
  }
  return attr;
}

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  });
}

AlgoChoice algorithm_from_env() {
  const char* e = std::getenv("DREAMDDP_GLOO_ALGO");
  std::string a = e ? e : "ring";
  if (a == "auto") return AlgoChoice::Auto;
  if (a == "ring") return AlgoChoice::Ring;
  if (a == "bcube") return AlgoChoice::Bcube;
  throw UsageError("DREAMDDP_GLOO_ALGO='" + a + "' is not one of ring, bcube, auto");
}

gloo::AllreduceOptions::Algorithm pick(AlgoChoice c, size_t bytes) {
  if (c == AlgoChoice::Ring || (c == AlgoChoice::Auto && bytes >= kBcubeBelowBytes))
    return gloo::AllreduceOptions::Algorithm::RING;
  return gloo::AllreduceOptions::Algorithm::BCUBE;
}

StartupWatchdog::StartupWatchdog(std::string what, double limit_s)
    : thread_([this, what = std::move(what), limit_s] {
        std::unique_lock<std::mutex> lock(m_);
        if (cv_.wait_for(lock, std::chrono::duration<double>(limit_s), [this] { return done_; })) return;
        std::fprintf(stderr, "dreamddp: error: %s did not complete within %s: a peer never connected (does --iface / "
                     "GLOO_SOCKET_IFNAME reach the other hosts?)\n", what.c_str(), seconds(limit_s).c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }) {}

StartupWatchdog::~StartupWatchdog() {
  {
    std::lock_guard<std::mutex> lock(m_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace dd::gloo_settings
