// MpiBackend: nonblocking MPI collectives polled with a deadline (MPI has no per-op timeout) on a FIFO
// communication thread; blocking control ops on a duplicate communicator so they never queue behind bulk data.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backends/common/comm_queue.h"
#include "backends/mpi/mpi_backend.h"
#include "base/clock.h"
#include "base/error.h"

namespace dd {
namespace {

std::atomic<bool> g_any_failure{false};
bool g_we_initialized = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_any_failure.load()) MPI_Finalize();
}

int init_mpi() {
  static std::once_flag once;
  static int provided = MPI_THREAD_SINGLE;
  std::call_once(once, [] {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) {
      MPI_Query_thread(&provided);
      return;
    }
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Init_thread failed; run under mpirun");
    g_we_initialized = true;
    std::atexit(finalize_at_exit);
  });
  return provided;
}

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g s", s);
  return b;
}

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, len);
}

MPI_Comm dup(MPI_Comm c) {
  MPI_Comm out;
  MPI_Comm_dup(c, &out);
  MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
  return out;
}

class MpiBackend : public Backend {
 public:
  // `shared_queue` is non-null when the MPI library is not thread-multiple: then every MPI call of every group
  // must go through one thread.
  MpiBackend(MPI_Comm parent, double timeout_s, std::vector<int> global, std::shared_ptr<CommQueue> shared_queue)
      : global_(std::move(global)), timeout_s_(timeout_s), queue_(std::move(shared_queue)) {
    multiple_ = !queue_;
    auto setup = [&] {
      data_ = dup(parent);
      ctl_ = dup(parent);
      MPI_Comm_rank(data_, &rank_);
      MPI_Comm_size(data_, &size_);
    };
    if (queue_) queue_->run_sync(setup);
    else setup();
    if (!queue_) queue_ = std::make_shared<CommQueue>("mpi rank " + std::to_string(rank_));
  }

  ~MpiBackend() override {
    auto q = std::move(queue_);
    if (q.use_count() == 1) q.reset();  // own thread: joined here, after its last op
    if (!failed_.load() && !g_any_failure.load()) {
      auto free_comms = [this] {
        MPI_Comm_free(&data_);
        MPI_Comm_free(&ctl_);
      };
      if (q) q->run_sync(free_comms);
      else free_comms();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  void set_timeout(double s) override {
    if (!(s > 0)) throw UsageError("mpi: timeout must be positive seconds");
    timeout_s_ = s;
  }
  double timeout() const override { return timeout_s_; }

  WorkPtr allreduce(float* data, size_t n, ReduceOp op) override {
    return queue_->submit([this, data, n, op] {
      check_alive();
      // MPI counts are int: reduce huge buffers in pieces.
      for (size_t off = 0; off < n; off += kChunk) {
        int cnt = static_cast<int>(std::min(kChunk, n - off));
        MPI_Request req;
        call("allreduce", MPI_Iallreduce(MPI_IN_PLACE, data + off, cnt, MPI_FLOAT, MPI_SUM, data_, &req));
        poll(req, "allreduce", n * sizeof(float));
      }
      if (op == ReduceOp::Avg && size_ > 1) {
        const float inv = 1.0f / static_cast<float>(size_);
        for (size_t i = 0; i < n; ++i) data[i] *= inv;
      }
    });
  }

  WorkPtr broadcast(float* data, size_t n, int root) override {
    if (root < 0 || root >= size_)
      throw UsageError("broadcast root " + std::to_string(root) + " is not a rank of this group of " +
                       std::to_string(size_));
    return queue_->submit([this, data, n, root] {
      check_alive();
      for (size_t off = 0; off < n; off += kChunk) {
        int cnt = static_cast<int>(std::min(kChunk, n - off));
        MPI_Request req;
        call("broadcast", MPI_Ibcast(data + off, cnt, MPI_FLOAT, root, data_, &req));
        poll(req, "broadcast", n * sizeof(float));
      }
    });
  }

  WorkPtr run_bytes(std::function<void(ByteChannel&)> fn, const char* what, size_t bytes) override {
    return queue_->submit([this, fn = std::move(fn), what, bytes] {
      check_alive();
      (void)bytes;
      Channel ch(*this, what);
      fn(ch);
    });
  }

  std::vector<std::string> allgather(const std::string& blob) override {
    std::vector<std::string> out(size_);
    control([&] {
      check_alive();
      int mine = static_cast<int>(blob.size());
      std::vector<int> len(size_), displ(size_);
      MPI_Request req;
      call("allgather", MPI_Iallgather(&mine, 1, MPI_INT, len.data(), 1, MPI_INT, ctl_, &req));
      poll(req, "allgather", sizeof(int));
      int total = 0;
      for (int r = 0; r < size_; ++r) {
        displ[r] = total;
        total += len[r];
      }
      std::vector<char> all(std::max(total, 1));
      std::string in = blob;
      call("allgather", MPI_Iallgatherv(in.data(), mine, MPI_CHAR, all.data(), len.data(), displ.data(), MPI_CHAR,
                                        ctl_, &req));
      poll(req, "allgather", blob.size());
      for (int r = 0; r < size_; ++r) out[r].assign(all.data() + displ[r], len[r]);
    });
    return out;
  }

  void barrier() override {
    control([&] {
      check_alive();
      MPI_Request req;
      call("barrier", MPI_Ibarrier(ctl_, &req));
      poll(req, "barrier", 0);
    });
  }

  std::unique_ptr<Backend> split(int color) override {
    // Agree on membership with a timed allgather first, so a dead peer fails here instead of hanging in
    // MPI_Comm_split (which cannot time out).
    auto colors = allgather(std::to_string(color));
    std::vector<int> global;
    for (int r = 0; r < size_; ++r)
      if (std::stoi(colors[r]) == color) global.push_back(global_[r]);
    MPI_Comm child = MPI_COMM_NULL;
    control([&] { call("split", MPI_Comm_split(ctl_, color, rank_, &child)); });
    std::unique_ptr<Backend> b(
        new MpiBackend(child, timeout_s_, std::move(global), multiple_ ? nullptr : queue_));
    control([&] { MPI_Comm_free(&child); });
    return b;
  }

 private:
  static constexpr size_t kChunk = size_t(1) << 30;

  // The byte channel of run_bytes: MPI_Ialltoall / MPI_Iallgather on the data communicator, polled with the timeout.
  class Channel : public ByteChannel {
   public:
    Channel(MpiBackend& b, const char* what) : b_(b), what_(what) {}
    void alltoall(const void* in, void* out, size_t n) override {
      MPI_Request req;
      b_.call(what_, MPI_Ialltoall(in, count(n), MPI_BYTE, out, count(n), MPI_BYTE, b_.data_, &req));
      b_.poll(req, what_, n * size_t(b_.size_));
    }
    void allgather(const void* in, void* out, size_t n) override {
      MPI_Request req;
      b_.call(what_, MPI_Iallgather(in, count(n), MPI_BYTE, out, count(n), MPI_BYTE, b_.data_, &req));
      b_.poll(req, what_, n * size_t(b_.size_));
    }

   private:
    int count(size_t n) const {
      if (n > size_t(INT_MAX)) throw UsageError(std::string("mpi: ") + what_ + ": a block of " + std::to_string(n) + " bytes exceeds MPI's int count");
      return int(n);
    }
    MpiBackend& b_;
    const char* what_;
  };

  std::string describe() const {
    return "mpi rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
           (static_cast<int>(global_.size()) == size_ && size_ > 0 && global_[rank_] != rank_
                ? " (global rank " + std::to_string(global_[rank_]) + ")"
                : "");
  }

  // Blocking ops: straight on the caller thread when MPI is thread-multiple, else through the one MPI thread.
  template <class F>
  void control(F&& fn) {
    if (multiple_) {
      std::lock_guard<std::mutex> lk(ctl_mutex_);
      fn();
    } else {
      queue_->run_sync([&] { fn(); });
    }
  }

  void check_alive() {
    if (failed_.load()) {
      std::lock_guard<std::mutex> lk(fail_mutex_);
      throw PeerLost(fail_msg_ + " (backend unusable after an earlier failure)");
    }
  }

  [[noreturn]] void fail(const std::string& msg) {
    std::lock_guard<std::mutex> lk(fail_mutex_);
    if (!failed_.load()) {
      fail_msg_ = msg;
      failed_.store(true);
      g_any_failure.store(true);
    }
    throw PeerLost(fail_msg_);
  }

  void call(const char* what, int rc) {
    if (rc != MPI_SUCCESS) fail(describe() + ": MPI " + what + " failed: " + mpi_error(rc));
  }

  // Spins briefly (latency of small messages), then sleeps between tests so two ranks on two cores can progress.
  void poll(MPI_Request& req, const char* what, size_t bytes) {
    const double t0 = now_s(), deadline = t0 + timeout_s_.load();
    int done = 0;
    for (long i = 0;; ++i) {
      MPI_Status st;
      int rc = MPI_Test(&req, &done, &st);
      if (rc != MPI_SUCCESS) fail(describe() + ": MPI " + what + " failed: " + mpi_error(rc));
      if (done) return;
      if (now_s() > deadline)
        fail(describe() + ": MPI " + what + " of " + std::to_string(bytes) + " bytes timed out after " +
             seconds(timeout_s_.load()) + ": a peer of this group of " + std::to_string(size_) +
             " is lost or stalled (MPI does not say which; check the other ranks' output)");
      if (i < 2000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(i < 20000 ? 20 : 200));
    }
  }

  int rank_ = 0, size_ = 1;
  MPI_Comm data_ = MPI_COMM_NULL, ctl_ = MPI_COMM_NULL;
  std::vector<int> global_;
  std::atomic<double> timeout_s_;
  bool multiple_ = true;
  std::mutex ctl_mutex_, fail_mutex_;
  std::atomic<bool> failed_{false};
  std::string fail_msg_;
  std::shared_ptr<CommQueue> queue_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const BackendOptions& opts) {
  if (!(opts.timeout_s > 0)) throw UsageError("mpi: timeout must be positive seconds");
  int provided = init_mpi();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (opts.world > 1 && (opts.world != size || opts.rank != rank))
    throw UsageError("mpi: this process was told rank " + std::to_string(opts.rank) + " of " +
                     std::to_string(opts.world) + " but MPI says " + std::to_string(rank) + " of " +
                     std::to_string(size) + "; launch the mpi backend with mpirun, not dreamddp launch");
  std::vector<int> global(size);
  for (int i = 0; i < size; ++i) global[i] = i;
  std::shared_ptr<CommQueue> shared;
  if (provided < MPI_THREAD_MULTIPLE) {
    // FUNNELED/SERIALIZED: one thread makes every MPI call, for every group.
    static std::shared_ptr<CommQueue> the_mpi_thread = std::make_shared<CommQueue>("mpi");
    shared = the_mpi_thread;
  }
  return std::make_unique<MpiBackend>(MPI_COMM_WORLD, opts.timeout_s, std::move(global), shared);
}

}  // namespace dd
