// GlooBackend: async collectives on a FIFO communication thread over one Gloo TCP context, blocking control
// ops (allgather, barrier, split) on a second context so they never queue behind bulk transfers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "backends/common/comm_queue.h"
#include "backends/gloo/gloo_backend.h"
#include "backends/gloo/gloo_settings.h"
#include "backends/gloo/gloo_sockets.h"
#include "base/clock.h"
#include "base/error.h"

namespace dd {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

using gloo_settings::AlgoChoice;
using gloo_settings::algorithm_from_env;
using gloo_settings::bind_attr;
using gloo_settings::ignore_sigpipe_once;
using gloo_settings::pick;
using gloo_settings::seconds;
using gloo_settings::to_ms;

class GlooBackend : public Backend {
 public:
  GlooBackend(int rank, int size, std::shared_ptr<gloo::rendezvous::Store> store, const BackendOptions& opts,
              std::vector<int> global_ranks, std::shared_ptr<gloo::transport::Device> device)
      : rank_(rank),
        size_(size),
        prefix_(opts.prefix),
        store_(std::move(store)),
        device_(std::move(device)),
        global_(std::move(global_ranks)),
        opts_(opts),
        timeout_s_(opts.timeout_s),
        algorithm_(algorithm_from_env()) {
    if (size < 1 || rank < 0 || rank >= size)
      throw UsageError("gloo: rank " + std::to_string(rank) + " is not in a world of " + std::to_string(size));
    if (!(opts.timeout_s > 0)) throw UsageError("gloo: timeout must be positive seconds");
    ignore_sigpipe_once();
    if (!device_) {
      try {
        device_ = gloo::transport::tcp::CreateDevice(bind_attr(opts.iface, size));
      } catch (const std::exception& e) {
        throw UsageError(std::string("gloo: cannot bind a TCP device (") +
                         (opts.iface.empty() ? "hostname/loopback" : "interface " + opts.iface) + "): " + e.what() +
                         "; pass --iface NAME or set GLOO_SOCKET_IFNAME");
      }
    }
    // Start-up can be slow on a loaded machine (other ranks still loading data); a short per-op timeout
    // must not make the rendezvous itself fail.
    double connect_s = opts.connect_s > 0 ? opts.connect_s : std::max(opts.timeout_s, 30.0);
    try {
      store_->set(prefix_ + "/hello/" + std::to_string(rank_), {'1'});
    } catch (const gloo::EnforceNotMet& e) {
      // RedisStore refuses to overwrite a key: an earlier job left its keys in this store.
      throw UsageError("gloo: the rendezvous store already holds keys of an earlier job (" + std::string(e.what()) +
                       "); give every job a fresh store: a new file:// directory (or a new DREAMDDP_JOB for the default store "
                       "under --out), redis://host:port/JOB with a new JOB, or FLUSHALL the redis-server");
    }
    const auto before = gloo_sockets::of_process();
    data_ = connect("data", connect_s);
    ctl_ = connect("ctl", connect_s);
    sockets_ = gloo_sockets::opened(before, gloo_sockets::of_process());
    queue_ = std::make_unique<CommQueue>(describe());
  }

  ~GlooBackend() override {
    queue_.reset();  // finishes the running op (bounded by the timeout) before its context goes away
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "gloo"; }
  void set_timeout(double s) override {
    if (!(s > 0)) throw UsageError("gloo: timeout must be positive seconds");
    timeout_s_ = s;
  }
  double timeout() const override { return timeout_s_; }

  // Every socket of both contexts shut down (gloo_sockets.h): this rank's pending operations fail at once, and so do
  // the peers' operations with this rank. The world is broken anyway: the survivors agree on a new one.
  void abort_peer(int rank, const std::string& why) override {
    if (rank < 0 || rank >= size_ || rank == rank_) return;
    {
      std::lock_guard<std::mutex> lk(fail_mutex_);
      if (abort_why_.empty()) abort_why_ = rank_name(rank) + " " + why;
    }
    gloo_sockets::shut_down(sockets_);
  }

  // The call allreduce() makes, without the queue and the guard (see gloo_bare_allreduce).
  void bare_allreduce(float* data, size_t n) {
    if (n == 0 || size_ == 1) return;
    gloo::AllreduceOptions o(data_);
    o.setOutput(data, n);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    o.setAlgorithm(pick(algorithm_, n * sizeof(float)));
    o.setTimeout(to_ms(timeout_s_));
    gloo::allreduce(o);
  }

  WorkPtr allreduce(float* data, size_t n, ReduceOp op) override {
    return queue_->submit([this, data, n, op] {
      guarded("allreduce", n * sizeof(float), [&] {
        if (n == 0 || size_ == 1) return;
        bare_allreduce(data, n);
        if (op == ReduceOp::Avg) {
          const float inv = 1.0f / static_cast<float>(size_);
          for (size_t i = 0; i < n; ++i) data[i] *= inv;
        }
      });
    });
  }

  WorkPtr broadcast(float* data, size_t n, int root) override {
    if (root < 0 || root >= size_)
      throw UsageError("broadcast root " + std::to_string(root) + " is not a rank of this group of " +
                       std::to_string(size_));
    return queue_->submit([this, data, n, root] {
      guarded("broadcast", n * sizeof(float), [&] {
        if (n == 0 || size_ == 1) return;
        gloo::BroadcastOptions o(data_);
        o.setOutput(data, n);
        o.setRoot(root);
        o.setTimeout(to_ms(timeout_s_));
        gloo::broadcast(o);
      });
    });
  }

  WorkPtr run_bytes(std::function<void(ByteChannel&)> fn, const char* what, size_t bytes) override {
    return queue_->submit([this, fn = std::move(fn), what, bytes] {
      guarded(what, bytes, [&] {
        Channel ch(*this);
        fn(ch);
      });
    });
  }

  std::vector<std::string> allgather(const std::string& blob) override {
    std::lock_guard<std::mutex> lk(ctl_mutex_);
    std::vector<std::string> out(size_);
    guarded("allgather", blob.size(), [&] {
      if (size_ == 1) {
        out[0] = blob;
        return;
      }
      std::vector<int64_t> len(size_);
      int64_t mine = static_cast<int64_t>(blob.size());
      gloo::AllgatherOptions lo(ctl_);
      lo.setInput(&mine, 1);
      lo.setOutput(len.data(), len.size());
      lo.setTimeout(to_ms(timeout_s_));
      gloo::allgather(lo);
      std::vector<size_t> counts(len.begin(), len.end());
      size_t total = 0;
      for (auto c : counts) total += c;
      if (total == 0) return;
      std::vector<char> all(total);
      std::string in = blob;  // gloo wants a non-const pointer
      gloo::AllgathervOptions vo(ctl_);
      vo.setInput(in.data(), in.size());
      vo.setOutput(all.data(), counts);
      vo.setTimeout(to_ms(timeout_s_));
      gloo::allgatherv(vo);
      size_t off = 0;
      for (int r = 0; r < size_; ++r) {
        out[r].assign(all.data() + off, counts[r]);
        off += counts[r];
      }
    });
    return out;
  }

  void barrier() override {
    std::lock_guard<std::mutex> lk(ctl_mutex_);
    guarded("barrier", 0, [&] {
      if (size_ == 1) return;
      gloo::BarrierOptions o(ctl_);
      o.setTimeout(to_ms(timeout_s_));
      gloo::barrier(o);
    });
  }

  std::unique_ptr<Backend> split(int color) override {
    auto colors = allgather(std::to_string(color));
    std::vector<int> members, global;
    int new_rank = -1;
    for (int r = 0; r < size_; ++r) {
      if (std::stoi(colors[r]) != color) continue;
      if (r == rank_) new_rank = static_cast<int>(members.size());
      members.push_back(r);
      global.push_back(global_[r]);
    }
    BackendOptions o = opts_;
    o.timeout_s = timeout_s_;
    o.prefix = prefix_ + "/split" + std::to_string(split_count_++) + "/c" + std::to_string(color);
    return std::make_unique<GlooBackend>(new_rank, static_cast<int>(members.size()), store_, o, std::move(global),
                                         device_);
  }

 private:
  // The byte channel of run_bytes: Gloo's all-to-all and all-gather on the data context, on the comm thread.
  class Channel : public ByteChannel {
   public:
    explicit Channel(GlooBackend& b) : b_(b) {}
    void alltoall(const void* in, void* out, size_t n) override {
      if (b_.size_ == 1 || n == 0) return copy(in, out, n);
      gloo::AlltoallOptions o(b_.data_);
      o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), n * size_t(b_.size_));
      o.setOutput(static_cast<uint8_t*>(out), n * size_t(b_.size_));
      o.setTimeout(to_ms(b_.timeout_s_));
      gloo::alltoall(o);
    }
    void allgather(const void* in, void* out, size_t n) override {
      if (b_.size_ == 1 || n == 0) return copy(in, out, n);
      gloo::AllgatherOptions o(b_.data_);
      o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), n);
      o.setOutput(static_cast<uint8_t*>(out), n * size_t(b_.size_));
      o.setTimeout(to_ms(b_.timeout_s_));
      gloo::allgather(o);
    }

   private:
    static void copy(const void* in, void* out, size_t n) {
      if (n) std::memmove(out, in, n);
    }
    GlooBackend& b_;
  };

  std::string describe() const {
    return "gloo rank " + std::to_string(rank_) + "/" + std::to_string(size_) + " (group '" + prefix_ + "')";
  }

  std::string rank_name(int r) const {
    std::string s = "rank " + std::to_string(r);
    if (global_[r] != r) s += " (global rank " + std::to_string(global_[r]) + ")";
    return s;
  }

  std::shared_ptr<gloo::Context> connect(const std::string& what, double connect_s) {
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    ctx->setTimeout(to_ms(connect_s));  // used by connectFullMesh's store waits and pair connects
    gloo::rendezvous::PrefixStore ps(prefix_ + "/" + what, *store_);
    // Gloo's accepting side of a pair waits for its peer without a deadline: never for ever (see StartupWatchdog).
    gloo_settings::StartupWatchdog watchdog(describe() + ": rendezvous ('" + what + "')", connect_s + 5.0);
    try {
      ctx->connectFullMesh(ps, device_);
    } catch (const std::exception& e) {
      auto missing = missing_ranks("/hello/", 0.0);
      throw PeerLost(describe() + ": rendezvous failed after " + seconds(connect_s) +
                     (missing.empty() ? "" : "; " + missing + " never arrived") + ": " + e.what());
    }
    ctx->setTimeout(to_ms(timeout_s_));
    return ctx;
  }

  // Ranks of this group whose `<prefix><kind><r>` key does not appear within `grace_s`, as "rank a, rank b".
  std::string missing_ranks(const std::string& kind, double grace_s) {
    const double deadline = now_s() + grace_s;
    std::string out;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      double left = std::max(0.001, deadline - now_s());
      bool present = false;
      try {
        store_->wait({prefix_ + kind + std::to_string(r)}, to_ms(left));
        present = true;
      } catch (...) {
      }
      if (!present) out += (out.empty() ? "" : ", ") + rank_name(r);
    }
    return out;
  }

  // Runs one Gloo call; any Gloo error kills the context (Gloo cannot recover a pair), so the backend is
  // marked failed and this and every later op throw PeerLost naming the ranks that stopped answering.
  template <class F>
  void guarded(const char* what, size_t bytes, F&& fn) {
    if (failed_.load()) throw PeerLost(failure_message());
    std::string cause;
    try {
      fn();
      return;
    } catch (const gloo::IoException& e) {
      cause = e.what();
    } catch (const gloo::Exception& e) {
      cause = e.what();
    } catch (const gloo::EnforceNotMet& e) {
      cause = e.what();
    }
    fail(what, bytes, cause);
  }

  [[noreturn]] void fail(const char* what, size_t bytes, const std::string& cause) {
    std::lock_guard<std::mutex> lk(fail_mutex_);
    if (!failed_.load()) {
      // Post-mortem through the store, which outlives the TCP mesh: every surviving rank reports once;
      // ranks that do not report within a short grace are the lost (dead or stalled) ones.
      std::string missing;
      const double grace = opts_.postmortem_s >= 0 ? opts_.postmortem_s : std::min(timeout_s_.load(), 3.0);
      if (grace > 0) {
        // First close this rank's connections: a survivor blocked on a recv from this rank (not from the lost
        // one) would otherwise notice only at its own timeout, after the grace, and be named lost with it.
        close_connections();
        try {
          store_->set(prefix_ + "/alive/" + std::to_string(rank_), {'1'});
          missing = missing_ranks("/alive/", grace);
        } catch (...) {
        }
      }
      fail_msg_ = describe() + ": " + what + " of " + std::to_string(bytes) + " bytes failed: " +
                  (!abort_why_.empty() ? "lost " + abort_why_
                   : grace <= 0        ? std::string("a peer was lost (not identified here: no post-mortem)")
                   : missing.empty() ? std::string("lost peer could not be identified (all ranks reported)")
                                     : "lost " + missing) +
                  " [timeout " + seconds(timeout_s_.load()) + "; gloo: " + cause + "]";
      failed_.store(true);
    }
    throw PeerLost(fail_msg_);
  }

  // Every pair of both contexts closed: the peers' pending and later operations with this rank fail at once. The
  // backend is unusable from here on anyway (failed_).
  void close_connections() noexcept {
    for (auto* c : {data_.get(), ctl_.get()}) {
      if (!c) continue;
      try {
        c->closeConnections();
      } catch (...) {
      }
    }
  }

  std::string failure_message() {
    std::lock_guard<std::mutex> lk(fail_mutex_);
    return fail_msg_ + " (backend unusable after an earlier failure)";
  }

  const int rank_, size_;
  const std::string prefix_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  const std::vector<int> global_;
  const BackendOptions opts_;
  std::atomic<double> timeout_s_;
  const AlgoChoice algorithm_;
  std::shared_ptr<gloo::Context> data_, ctl_;
  std::mutex ctl_mutex_, fail_mutex_;
  std::atomic<bool> failed_{false};
  std::string fail_msg_;
  std::string abort_why_;  // abort_peer's verdict, named by the failure it causes
  std::vector<gloo_sockets::Socket> sockets_;  // what connecting both contexts opened (abort_peer)
  int split_count_ = 0;
  std::unique_ptr<CommQueue> queue_;  // last: destroyed first
};

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(int rank, int world, std::shared_ptr<gloo::rendezvous::Store> store,
                                           const BackendOptions& opts) {
  if (!store) throw UsageError("gloo: no rendezvous store");
  std::vector<int> ranks(size_t(std::max(world, 0)));
  std::iota(ranks.begin(), ranks.end(), 0);
  return std::make_unique<GlooBackend>(rank, world, std::move(store), opts, std::move(ranks), nullptr);
}

BareAllreduce gloo_bare_allreduce(Backend& b) {
  auto* g = dynamic_cast<GlooBackend*>(&b);
  if (!g) return {};
  return [g](float* data, size_t n) { g->bare_allreduce(data, n); };
}

}  // namespace dd
