// The settings a Gloo backend takes from its options and the environment: the address its TCP device binds, op
// timeouts as Gloo takes them, the all-reduce algorithm (DREAMDDP_GLOO_ALGO) and SIGPIPE. Used by gloo_backend.cpp.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstddef>
#include <string>

#include <gloo/allreduce.h>
#include <gloo/transport/tcp/attr.h>

namespace dd::gloo_settings {

// "1.5 s": a duration in messages.
std::string seconds(double s);

// Seconds as Gloo's timeouts, rounded to milliseconds and at least 1 ms.
std::chrono::milliseconds to_ms(double s);

// Address Gloo binds to: explicit interface, else the hostname when it resolves, else loopback (single host).
// Throws dd::UsageError for an interface that does not exist.
gloo::transport::tcp::attr bind_attr(const std::string& iface_opt, int world);

// Writing to a socket whose peer died must become an error (EPIPE), not kill the process.
void ignore_sigpipe_once();

// Measured with `dreamddp bench allreduce` (4 ranks, loopback, 2 loaded cores): bcube wins below ~1 MiB (fewer
// latency-bound steps: ~4 vs ~10 ms at 256 KiB), the pipelined ring above (busbw ~0.4 vs ~0.1 GB/s at 16-64 MiB).
// The default is ring everywhere anyway: Gloo's bcube does not honour the op timeout when a peer stalls (it waited
// until the peer went away: tests/backends GlooDeadPeer.Stalled*), which breaks "never hang". bcube stays
// selectable for measurements (DREAMDDP_GLOO_ALGO=bcube); `auto` = bcube below 1 MiB, ring above.
enum class AlgoChoice { Auto, Ring, Bcube };
constexpr size_t kBcubeBelowBytes = size_t(1) << 20;

// DREAMDDP_GLOO_ALGO (ring by default); throws dd::UsageError for anything but ring, bcube, auto.
AlgoChoice algorithm_from_env();

// The algorithm of one all-reduce of `bytes`.
gloo::AllreduceOptions::Algorithm pick(AlgoChoice c, size_t bytes);

// Ends the process with one line on stderr and exit 3 (peer lost) unless destroyed within `limit_s`. Gloo's
// accepting side of a pair waits without a deadline for its peer to connect: a peer that gave up (its connect found
// no route, e.g. an --iface that does not reach the other hosts) would leave the rank waiting for ever.
class StartupWatchdog {
 public:
  StartupWatchdog(std::string what, double limit_s);
  ~StartupWatchdog();
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace dd::gloo_settings
