// NcclBackend: NCCL collectives on a private stream, completion via CUDA events, a non-blocking communicator
// polled with ncclCommGetAsyncError and aborted on timeout, so a dead peer gives PeerLost instead of a hang.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "backends/gloo/gloo_backend.h"
#include "backends/nccl/nccl_backend.h"
#include "base/clock.h"
#include "base/error.h"

#define DD_CUDA(call)                                                                                     \
  do {                                                                                                    \
    cudaError_t e_ = (call);                                                                              \
    if (e_ != cudaSuccess)                                                                                \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call ": " + \
                               cudaGetErrorString(e_));                                                   \
  } while (0)

namespace dd {
namespace {

// Shared by the backend and its outstanding Work handles (a handle may outlive the backend object).
struct NcclState {
  int rank = 0, size = 1, device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::mutex m;  // NCCL calls on one communicator from several threads must be serialized
  std::atomic<bool> failed{false};
  std::string fail_msg;
  std::atomic<double> timeout_s{60};

  std::string describe() const { return "nccl rank " + std::to_string(rank) + "/" + std::to_string(size); }

  [[noreturn]] void fail(const std::string& msg) {
    {
      std::lock_guard<std::mutex> lk(m);
      if (!failed.load()) {
        fail_msg = msg;
        failed.store(true);
        if (comm) ncclCommAbort(comm);  // unblocks kernels stuck waiting for a dead peer
        comm = nullptr;
      }
    }
    throw PeerLost(fail_msg);
  }

  void check_alive() {
    if (failed.load()) throw PeerLost(fail_msg + " (backend unusable after an earlier failure)");
  }

  // Non-blocking communicators return ncclInProgress; wait for the call to be enqueued, bounded by the timeout.
  void settle(ncclResult_t r, const char* what) {
    const double deadline = now_s() + timeout_s.load();
    while (r == ncclInProgress) {
      if (now_s() > deadline) fail(describe() + ": NCCL " + what + " did not complete within the timeout");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      ncclCommGetAsyncError(comm, &r);
    }
    if (r != ncclSuccess) fail(describe() + ": NCCL " + what + " failed: " + ncclGetErrorString(r));
  }
};

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> s, cudaEvent_t ev, const char* what) : s_(std::move(s)), ev_(ev), what_(what) {}
  ~NcclWork() override {
    if (ev_) cudaEventDestroy(ev_);
  }
  bool test() override {
    if (done_) return true;
    if (s_->failed.load()) return done_ = true;
    cudaError_t e = cudaEventQuery(ev_);
    if (e == cudaSuccess) return done_ = true;
    if (e != cudaErrorNotReady) return done_ = true;  // wait() reports it
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::mutex> lk(s_->m);
      if (s_->comm) ncclCommGetAsyncError(s_->comm, &r);
    }
    return done_ = (r != ncclSuccess && r != ncclInProgress);
  }
  void wait() override {
    // The deadline counts from the start of the wait: earlier ops on the stream legitimately take time.
    const double deadline = now_s() + s_->timeout_s.load();
    while (!test()) {
      if (now_s() > deadline)
        s_->fail(s_->describe() + ": NCCL " + what_ + " timed out after " + std::to_string(s_->timeout_s.load()) +
                 " s: a peer is lost or stalled (communicator aborted)");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    s_->check_alive();
    cudaError_t e = cudaEventQuery(ev_);
    if (e != cudaSuccess) {
      ncclResult_t r = ncclSuccess;
      if (s_->comm) ncclCommGetAsyncError(s_->comm, &r);
      s_->fail(s_->describe() + ": NCCL " + what_ + " failed: " +
               (r != ncclSuccess ? ncclGetErrorString(r) : cudaGetErrorString(e)));
    }
  }

 private:
  std::shared_ptr<NcclState> s_;
  cudaEvent_t ev_;
  const char* what_;
  bool done_ = false;
};

class NcclBackend : public Backend {
 public:
  NcclBackend(std::unique_ptr<Backend> control, int device, double timeout_s)
      : ctl_(std::move(control)), s_(std::make_shared<NcclState>()) {
    s_->rank = ctl_->rank();
    s_->size = ctl_->size();
    s_->device = device;
    s_->timeout_s = timeout_s;
    DD_CUDA(cudaSetDevice(device));
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (s_->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
      throw std::runtime_error(s_->describe() + ": ncclGetUniqueId failed");
    auto ids = ctl_->allgather(std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    std::memcpy(&id, ids[0].data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // lets init and collectives be polled and aborted instead of hanging
    ncclResult_t r = ncclCommInitRankConfig(&s_->comm, s_->size, id, s_->rank, &config);
    s_->settle(r, "communicator init");
    DD_CUDA(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking));
  }

  ~NcclBackend() override {
    if (s_->stream) cudaStreamSynchronize(s_->stream);
    {
      std::lock_guard<std::mutex> lk(s_->m);
      if (s_->comm) {
        if (s_->failed.load()) ncclCommAbort(s_->comm);
        else ncclCommDestroy(s_->comm);
        s_->comm = nullptr;
      }
    }
    if (s_->stream) cudaStreamDestroy(s_->stream);
    s_->stream = nullptr;
  }

  int rank() const override { return s_->rank; }
  int size() const override { return s_->size; }
  std::string name() const override { return "nccl"; }
  bool collectives_on_device_memory() const override { return true; }
  bool has_byte_channel() const override { return false; }
  void set_timeout(double s) override {
    if (!(s > 0)) throw UsageError("nccl: timeout must be positive seconds");
    s_->timeout_s = s;
    ctl_->set_timeout(s);
  }
  double timeout() const override { return s_->timeout_s.load(); }

  WorkPtr allreduce(float* data, size_t n, ReduceOp op) override {
    return launch("allreduce", [&](ncclComm_t c) {
      return ncclAllReduce(data, data, n, ncclFloat, op == ReduceOp::Avg ? ncclAvg : ncclSum, c, s_->stream);
    });
  }

  WorkPtr broadcast(float* data, size_t n, int root) override {
    if (root < 0 || root >= s_->size)
      throw UsageError("broadcast root " + std::to_string(root) + " is not a rank of this group of " +
                       std::to_string(s_->size));
    return launch("broadcast",
                  [&](ncclComm_t c) { return ncclBroadcast(data, data, n, ncclFloat, root, c, s_->stream); });
  }

  std::vector<std::string> allgather(const std::string& blob) override { return ctl_->allgather(blob); }
  void barrier() override { ctl_->barrier(); }

  std::unique_ptr<Backend> split(int color) override {
    auto child_ctl = ctl_->split(color);
    return std::make_unique<NcclBackend>(std::move(child_ctl), s_->device, s_->timeout_s.load());
  }

 private:
  template <class F>
  WorkPtr launch(const char* what, F&& enqueue) {
    s_->check_alive();
    DD_CUDA(cudaSetDevice(s_->device));
    cudaEvent_t ev;
    DD_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> lk(s_->m);
      r = s_->comm ? enqueue(s_->comm) : ncclInvalidUsage;
    }
    try {
      s_->settle(r, what);
      DD_CUDA(cudaEventRecord(ev, s_->stream));
    } catch (...) {
      cudaEventDestroy(ev);
      throw;
    }
    return std::make_shared<NcclWork>(s_, ev, what);
  }

  std::unique_ptr<Backend> ctl_;
  std::shared_ptr<NcclState> s_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const BackendOptions& opts) {
  int count = cuda_device_count();
  if (count <= 0)
    throw UsageError("nccl: no CUDA device is visible on this machine; use --backend gloo or mpi");
  BackendOptions c = opts;
  c.kind = BackendKind::Gloo;
  c.prefix = opts.prefix + "/nccl-ctl";
  auto control = make_gloo_backend(c);
  int device = discover_rank().local_rank % count;
  return std::make_unique<NcclBackend>(std::move(control), device, opts.timeout_s);
}

}  // namespace dd
