// The userspace stand-in for netem on one emulated node's link: a forwarder between the node's veth and the
// bridge that delays the node's outgoing frames by a constant time and drops a random share of them.
#pragma once
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dd::netem {

struct ImpairConfig {
  double delay_s = 0;           // constant one-way delay added to every uplink frame
  double loss_pct = 0;          // probability (percent) that an uplink frame is dropped
  uint64_t seed = 1;            // loss PRNG seed (fixed per node: the drop pattern repeats per frame sequence)
  size_t queue_frames = 1000;   // frames the delay line holds; more arriving while it is full are dropped
};

// Frames seen by one forwarder, valid after stop().
struct ImpairCounts {
  uint64_t up_frames = 0;       // frames the node sent (forwarded + dropped + over the queue limit)
  uint64_t up_dropped = 0;      // dropped by the loss draw
  uint64_t up_overflow = 0;     // dropped because the delay line was full
  uint64_t down_frames = 0;     // frames forwarded to the node
  uint64_t oversize = 0;        // frames larger than a slot (offloads on?): dropped
  uint64_t send_errors = 0;     // frames the kernel refused to send (e.g. the downlink tbf queue was full)
  uint64_t socket_drops = 0;    // frames the kernel dropped because the forwarder fell behind (socket full)
};

// Two threads, one per direction, on AF_PACKET sockets bound to two links in the launcher's namespace:
//   node_dev   - the host end of the node's veth pair: what the node sends arrives here (uplink), and frames
//                for the node are sent into it (through its tbf, the node's downlink rate);
//   bridge_dev - one end of a second veth pair whose other end is a bridge port.
// Uplink: node_dev -> loss draw -> delay line (FIFO, released at arrival + delay) -> bridge_dev.
// Downlink: bridge_dev -> node_dev, unchanged. Both links must carry whole frames (see veth_offload.h).
class LinkImpair {
 public:
  // Opens the sockets and starts the threads; throws std::runtime_error when a socket cannot be set up.
  LinkImpair(int node, const std::string& node_dev, const std::string& bridge_dev, const ImpairConfig& cfg);
  ~LinkImpair();
  LinkImpair(const LinkImpair&) = delete;
  LinkImpair& operator=(const LinkImpair&) = delete;

  // Stops and joins both threads (within ~50 ms), discarding frames still in the delay line. Idempotent.
  void stop() noexcept;
  const ImpairCounts& counts() const { return counts_; }
  // "netem: node0 uplink: 123456 frames, 1234 dropped (1.00%), delay 2 ms; downlink: 120000 frames[; ...]"
  std::string summary() const;

 private:
  void uplink();
  void downlink();

  int node_;
  ImpairConfig cfg_;
  int node_fd_ = -1;
  int bridge_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: wakes both threads at once on stop()
  ImpairCounts up_counts_, down_counts_;  // written by the uplink / downlink thread when it ends
  ImpairCounts counts_;                    // the merge, made by stop()
  std::thread up_, down_;
  bool running_ = false;
};

}  // namespace dd::netem
