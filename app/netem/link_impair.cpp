// LinkImpair (see link_impair.h). Hot loops allocate nothing: the delay line is a preallocated ring of frame
// slots that recvmmsg fills in place and sendmmsg drains in place; every wait is a ppoll that the stop eventfd
// interrupts, and every inner loop is bounded by a batch or the ring size.
#include "app/netem/link_impair.h"

#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace dd::netem {
namespace {

constexpr size_t kSlot = 2048;  // bytes per frame slot: an MTU-1500 frame (+VLAN tag) fits, a GSO one does not
constexpr int kBatch = 64;      // frames per recvmmsg/sendmmsg call

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A raw socket that sees every frame arriving on `dev` (and none it sends itself) and sends frames out of it.
int open_packet_socket(const std::string& dev) {
  const unsigned ifindex = if_nametoindex(dev.c_str());
  if (ifindex == 0) throw std::runtime_error("netem forwarder: no link " + dev + ": " + strerror(errno));
  // Protocol 0 until bound: nothing from other links is queued before bind narrows the socket to `dev`.
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw std::runtime_error(std::string("netem forwarder: cannot open an AF_PACKET socket (needs root/"
                                         "CAP_NET_RAW): ") + strerror(errno));
  auto fail = [&](const char* what) {
    const std::string msg = "netem forwarder: " + std::string(what) + " on " + dev + ": " + strerror(errno);
    close(fd);
    throw std::runtime_error(msg);
  };
  // Deep buffers: the forwarder shares two cores with the ranks and must ride out scheduling gaps.
  const int buf = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0) fail("SO_RCVBUFFORCE");
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0) fail("SO_SNDBUFFORCE");
  // Blocking sends wait for socket space (backpressure), but never forever.
  timeval to{0, 200000};
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &to, sizeof to) != 0) fail("SO_SNDTIMEO");
  const int one = 1;
  // Kernel receive times: the delay runs from a frame's arrival, not from when the forwarder got a core.
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0) fail("SO_TIMESTAMPNS");
  // Older kernels lack it; the receive loops also skip PACKET_OUTGOING frames themselves.
  (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) fail("bind");
  packet_mreq mr{};
  mr.mr_ifindex = static_cast<int>(ifindex);
  mr.mr_type = PACKET_MR_PROMISC;  // frames for any MAC: the node talks to its peers', not to this link's
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0) fail("PACKET_ADD_MEMBERSHIP");
  return fd;
}

int64_t real_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// How long ago (ns) the kernel received the frame of `msg`, from its SO_TIMESTAMPNS stamp (CLOCK_REALTIME)
// against `real_now`; clamped to [0, cap] so a clock step can never hold a frame longer than the delay.
int64_t age_ns(const msghdr& msg, int64_t real_now, int64_t cap) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec ts;
    std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
    return std::clamp<int64_t>(real_now - (int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec), 0, cap);
  }
  return 0;
}

uint64_t socket_drops(int fd) {
  tpacket_stats st{};
  socklen_t len = sizeof st;
  return getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0 ? st.tp_drops : 0;
}

// The forwarder is the emulated network hardware: keep it ahead of the ranks' compute, and its timers tight.
void prepare_thread() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the launcher's main thread takes every signal
  prctl(PR_SET_TIMERSLACK, 1000UL);
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), -10);
}

// Waits for `fd` to be readable, the stop eventfd, or the timeout (ns; < 0 = none). False when stopping.
bool wait_readable(int fd, int stop_fd, int64_t timeout_ns) {
  pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  const int rc = ppoll(p, 2, timeout_ns < 0 ? nullptr : &ts, nullptr);
  return !(rc > 0 && (p[1].revents & POLLIN));
}

// One frame's message header over `iov`; for receives also where the sender's address and control data go.
void frame_msg(mmsghdr& m, iovec& iov, sockaddr_ll* from = nullptr, void* control = nullptr, size_t control_len = 0) {
  m = {};
  m.msg_hdr.msg_iov = &iov;
  m.msg_hdr.msg_iovlen = 1;
  if (from) {
    m.msg_hdr.msg_name = from;
    m.msg_hdr.msg_namelen = sizeof *from;
  }
  m.msg_hdr.msg_control = control;
  m.msg_hdr.msg_controllen = control_len;
}

// Sends msgs[0..n) in order; a frame the kernel refuses is counted and skipped. Returns frames sent; stops
// early (returning fewer) only when the socket stays full past its send timeout.
int send_all(int fd, mmsghdr* msgs, int n, uint64_t* errors) {
  int done = 0;
  for (int tries = 0; done < n && tries < 4 * n + 8; ++tries) {
    const int r = sendmmsg(fd, msgs + done, static_cast<unsigned>(n - done), 0);
    if (r > 0) {
      done += r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      ++*errors;  // ENOBUFS (tbf queue full), ENXIO (link going away), ...: the frame is lost, as on a wire
      ++done;
    }
  }
  return done;
}

// The uplink's delay line: a preallocated ring of frame slots that recvmmsg fills in place, each frame due at its
// kernel arrival plus the delay, drained in order by sendmmsg; the loss draw drops frames on the way in.
class DelayLine {
 public:
  explicit DelayLine(const ImpairConfig& cfg)
      : cap_(cfg.queue_frames),
        data_(cap_ * kSlot),
        due_(cap_),
        len_(cap_),
        scratch_(kSlot),
        delay_ns_(std::llround(cfg.delay_s * 1e9)),
        threshold_(loss_threshold(cfg.loss_pct)),
        rng_(cfg.seed) {}

  // Until the oldest frame is due (ns; -1: the line is empty, wait for frames only).
  int64_t timeout_ns(int64_t now) const {
    return head_ != tail_ ? std::max<int64_t>(0, due_[head_ % cap_] - now) : -1;
  }

  // Receives what is there, at most one ring's worth per wake-up so due frames are never starved.
  void receive(int fd) {
    for (size_t got_total = 0; got_total < cap_;) {
      const size_t used = tail_ - head_;
      const size_t idx = tail_ % cap_;
      const bool full = used == cap_;
      const int n = full ? 1 : static_cast<int>(std::min<size_t>({size_t(kBatch), cap_ - idx, cap_ - used}));
      for (int i = 0; i < n; ++i) {
        iov_[i] = {full ? scratch_.data() : &data_[(idx + i) * kSlot], kSlot};
        frame_msg(msgs_[i], iov_[i], &from_[i], control_[i], sizeof control_[i]);
      }
      const int r = recvmmsg(fd, msgs_, static_cast<unsigned>(n), MSG_DONTWAIT | MSG_TRUNC, nullptr);
      if (r <= 0) break;
      got_total += static_cast<size_t>(r);
      keep(r, idx, full);
      if (r < n) break;
    }
  }

  // Releases every frame whose time has come, oldest first, in contiguous batches.
  void release(int fd) {
    const int64_t now = mono_ns();
    for (size_t guard = 0; head_ != tail_ && due_[head_ % cap_] <= now && guard < cap_; ++guard) {
      const size_t idx = head_ % cap_;
      int n = 0;
      while (n < kBatch && head_ + n != tail_ && idx + n < cap_ && due_[idx + n] <= now) {
        iov_[n] = {&data_[(idx + n) * kSlot], len_[idx + n]};
        frame_msg(msgs_[n], iov_[n]);
        ++n;
      }
      const int sent = send_all(fd, msgs_, n, &c_.send_errors);
      head_ += static_cast<uint64_t>(sent);
      if (sent < n) break;  // socket full: retry on the next wake-up
    }
  }

  const ImpairCounts& counts() const { return c_; }

 private:
  // Drop when a uniform 64-bit draw falls below p * 2^64 (loss 100% drops everything).
  static uint64_t loss_threshold(double loss_pct) {
    const double p = loss_pct / 100;
    return p >= 1 ? UINT64_MAX : static_cast<uint64_t>(std::ldexp(p, 64));
  }

  // Counts the r frames just received into slots from idx and keeps those that pass, compacted towards the
  // tail in arrival order.
  void keep(int r, size_t idx, bool full) {
    const int64_t now = mono_ns();
    const int64_t real_now = real_ns();
    uint64_t w = tail_;
    for (int i = 0; i < r; ++i) {
      if (from_[i].sll_pkttype == PACKET_OUTGOING) continue;
      ++c_.up_frames;
      if ((msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) || msgs_[i].msg_len > kSlot) {
        ++c_.oversize;
        continue;
      }
      if (full) {
        ++c_.up_overflow;
        continue;
      }
      if (threshold_ && splitmix64(&rng_) < threshold_) {
        ++c_.up_dropped;
        continue;
      }
      const size_t at = w % cap_;
      if (at != idx + static_cast<size_t>(i))
        std::memmove(&data_[at * kSlot], &data_[(idx + i) * kSlot], msgs_[i].msg_len);
      len_[at] = msgs_[i].msg_len;
      // Never earlier than the previous frame: ordering is kept even if two stamps disagree.
      due_[at] = now + delay_ns_ - age_ns(msgs_[i].msg_hdr, real_now, delay_ns_);
      if (w != head_ && due_[at] < due_[(w - 1) % cap_]) due_[at] = due_[(w - 1) % cap_];
      ++w;
    }
    tail_ = w;
  }

  const size_t cap_;
  std::vector<unsigned char> data_;
  std::vector<int64_t> due_;
  std::vector<uint32_t> len_;
  std::vector<unsigned char> scratch_;  // frames that arrive while the ring is full land here
  const int64_t delay_ns_;
  const uint64_t threshold_;
  uint64_t rng_;
  uint64_t head_ = 0, tail_ = 0;  // ring positions (monotonic); slot = pos % cap
  ImpairCounts c_;
  mmsghdr msgs_[kBatch];
  iovec iov_[kBatch];
  sockaddr_ll from_[kBatch];
  alignas(cmsghdr) char control_[kBatch][CMSG_SPACE(sizeof(timespec))];
};

}  // namespace

LinkImpair::LinkImpair(int node, const std::string& node_dev, const std::string& bridge_dev,
                       const ImpairConfig& cfg)
    : node_(node), cfg_(cfg) {
  cfg_.queue_frames = std::max<size_t>(cfg_.queue_frames, kBatch);
  try {
    node_fd_ = open_packet_socket(node_dev);
    bridge_fd_ = open_packet_socket(bridge_dev);
    stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd_ < 0) throw std::runtime_error(std::string("netem forwarder: eventfd: ") + strerror(errno));
    up_ = std::thread([this] { uplink(); });
    running_ = true;
    down_ = std::thread([this] { downlink(); });
  } catch (...) {
    stop();
    throw;
  }
}

LinkImpair::~LinkImpair() { stop(); }

void LinkImpair::stop() noexcept {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
  }
  if (up_.joinable()) up_.join();
  if (down_.joinable()) down_.join();
  if (running_) {
    // Each thread wrote only its own counts; merged once both are joined.
    counts_ = up_counts_;
    counts_.down_frames = down_counts_.down_frames;
    counts_.oversize += down_counts_.oversize;
    counts_.send_errors += down_counts_.send_errors;
    counts_.socket_drops = socket_drops(node_fd_) + socket_drops(bridge_fd_);
    running_ = false;
  }
  for (int* fd : {&node_fd_, &bridge_fd_, &stop_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void LinkImpair::uplink() {
  prepare_thread();
  DelayLine line(cfg_);
  for (;;) {
    if (!wait_readable(node_fd_, stop_fd_, line.timeout_ns(mono_ns()))) break;
    line.receive(node_fd_);
    line.release(bridge_fd_);
  }
  up_counts_ = line.counts();
}

void LinkImpair::downlink() {
  prepare_thread();
  std::vector<unsigned char> data(size_t(kBatch) * kSlot);
  mmsghdr msgs[kBatch], out[kBatch];
  iovec iov[kBatch];
  sockaddr_ll from[kBatch];
  uint64_t frames = 0, oversize = 0, errors = 0;
  while (wait_readable(bridge_fd_, stop_fd_, -1)) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {&data[size_t(i) * kSlot], kSlot};
      frame_msg(msgs[i], iov[i], &from[i]);
    }
    const int r = recvmmsg(bridge_fd_, msgs, kBatch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
    if (r <= 0) continue;
    int n = 0;
    for (int i = 0; i < r; ++i) {
      if (from[i].sll_pkttype == PACKET_OUTGOING) continue;
      if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || msgs[i].msg_len > kSlot) {
        ++oversize;
        continue;
      }
      iov[i].iov_len = msgs[i].msg_len;
      frame_msg(out[n], iov[i]);
      ++n;
    }
    frames += static_cast<uint64_t>(n);
    // Backpressure rather than loss: wait out a full socket (bounded by its send timeout per attempt).
    for (int done = 0, tries = 0; done < n && tries < 50; ++tries)
      done += send_all(node_fd_, out + done, n - done, &errors);
  }
  down_counts_.down_frames = frames;
  down_counts_.oversize = oversize;
  down_counts_.send_errors = errors;
}

std::string LinkImpair::summary() const {
  const ImpairCounts& c = counts_;
  char buf[512];
  const double pct = c.up_frames ? 100.0 * double(c.up_dropped) / double(c.up_frames) : 0.0;
  int k = std::snprintf(buf, sizeof buf, "netem: node%d uplink: %llu frames, %llu dropped (%.2f%%), delay %g ms; "
                        "downlink: %llu frames", node_, (unsigned long long)c.up_frames,
                        (unsigned long long)c.up_dropped, pct, cfg_.delay_s * 1e3,
                        (unsigned long long)c.down_frames);
  auto extra = [&](uint64_t v, const char* what) {
    if (v && k > 0 && size_t(k) < sizeof buf)
      k += std::snprintf(buf + k, sizeof buf - size_t(k), "; %llu %s", (unsigned long long)v, what);
  };
  extra(c.up_overflow, "over the delay-line limit");
  extra(c.oversize, "oversize (offloads on?)");
  extra(c.send_errors, "refused by the kernel (queue full)");
  extra(c.socket_drops, "lost in the forwarder (socket full)");
  return buf;
}

}  // namespace dd::netem
