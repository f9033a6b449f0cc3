// make_device_path: the staging thread, pinned host mirrors of the device arenas, and the Work handles whose
// wait() orders the compute stream after a collective's result.
#include "core/sync/cuda/device_path.h"

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/fp_mode.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/sync/cuda/device_job.h"

namespace dd::sync {
namespace device {

class DevicePath : public DataPath {
 public:
  DevicePath(DeviceCollectives kind, const Arenas& a, cudaStream_t compute, std::function<cudaEvent_t(int)> ready)
      : kind_(kind), compute_(compute), ready_(std::move(ready)) {
    for (auto* s : {&gate_, &h2d_, &sync_}) DD_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    if (kind_ == DeviceCollectives::Staged) {
      mirror(a.params, a.num_params);
      mirror(a.grads, a.num_params);
      mirror(a.buffers, a.num_buffers);
      mirror(a.opt_state, a.num_params * a.state_slots);
    }
    DD_CUDA_CHECK(cudaGetDevice(&device_));
    thread_ = std::thread([this] { apply_subnormals_here(); loop(); });
  }

  ~DevicePath() override {
    {
      std::lock_guard<std::mutex> lk(qm_);
      stop_ = true;
    }
    qcv_.notify_all();
    thread_.join();
    for (auto* s : {gate_, h2d_, sync_}) cudaStreamDestroy(s);
    for (auto& r : regions_) cudaFreeHost(r.host);
    for (auto& [n, p] : dev_pool_) cudaFree(p);
    if (scratch_) cudaFree(scratch_);
  }

  bool host_memory() const override { return false; }
  WorkPtr allreduce(Backend& g, float* p, size_t n, ReduceOp op, int ready_layer) override {
    return arena_job(JobKind::Allreduce, g, p, n, op, 0, ready_layer);
  }
  WorkPtr broadcast(Backend& g, float* p, size_t n, int root) override {
    return arena_job(JobKind::Broadcast, g, p, n, ReduceOp::Sum, root, -1);
  }

  WorkPtr allreduce_host(Backend& g, float* p, size_t n, ReduceOp op) override {
    auto j = std::make_shared<Job>();
    j->kind = JobKind::HostAllreduce;
    j->g = &g;
    j->host = p;
    j->n = n;
    j->op = op;
    if (kind_ == DeviceCollectives::Nccl) j->dev = take_device(n);
    push(j);
    return std::make_shared<DeviceWork>(j, this);
  }

  WorkPtr run_host(const std::function<WorkPtr()>& start) override {
    auto j = std::make_shared<Job>();
    j->kind = JobKind::Host;
    j->start = start;
    push(j);
    return std::make_shared<DeviceWork>(j, this);
  }

  void save(const float* p, size_t n, std::vector<float>& host) override {
    host.resize(n);
    if (!n) return;
    after_compute(sync_);
    DD_CUDA_CHECK(cudaMemcpyAsync(host.data(), p, 4 * n, cudaMemcpyDeviceToHost, sync_));
    DD_CUDA_CHECK(cudaStreamSynchronize(sync_));
  }

  void restore(float* p, size_t n, const std::vector<float>& host) override {
    if (!n) return;
    after_compute(sync_);
    DD_CUDA_CHECK(cudaMemcpyAsync(p, host.data(), 4 * n, cudaMemcpyHostToDevice, sync_));
    DD_CUDA_CHECK(cudaStreamSynchronize(sync_));  // pageable source: the copy must finish before `host` may go away
  }

  float* scratch(size_t n) override {
    if (n > scratch_n_) {
      if (scratch_) {
        DD_CUDA_CHECK(cudaStreamSynchronize(compute_));
        cudaFree(scratch_);
        for (auto it = regions_.begin(); it != regions_.end(); ++it)
          if (it->dev == scratch_) {
            cudaFreeHost(it->host);
            regions_.erase(it);
            break;
          }
      }
      DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_), 4 * n));
      DD_CUDA_CHECK(cudaMemsetAsync(scratch_, 0, 4 * n, compute_));
      scratch_n_ = n;
      if (kind_ == DeviceCollectives::Staged) mirror(scratch_, int64_t(n));
    }
    return scratch_;
  }

  void wait_layer_ready(int l) override { DD_CUDA_CHECK(cudaEventSynchronize(ready_(l))); }

  // DeviceWork::wait's device side, on the caller's (compute) thread.
  void finish(Job& j) {
    if (j.h2d) DD_CUDA_CHECK(cudaStreamWaitEvent(compute_, j.h2d, 0));
    if (j.kind == JobKind::HostAllreduce && j.dev) {  // Nccl: the result back into the caller's vector
      DD_CUDA_CHECK(cudaMemcpyAsync(j.host, j.dev, 4 * j.n, cudaMemcpyDeviceToHost, sync_));
      DD_CUDA_CHECK(cudaStreamSynchronize(sync_));
      give_device(j.dev, j.n);
      j.dev = nullptr;
    }
  }

 private:
  struct Region {
    float* dev;
    float* host;
    int64_t n;
  };

  void mirror(float* dev, int64_t n) {
    if (!dev || n <= 0) return;
    void* h = nullptr;
    DD_CUDA_CHECK(cudaHostAlloc(&h, 4 * size_t(n), cudaHostAllocDefault));
    regions_.push_back({dev, static_cast<float*>(h), n});
  }

  // The pinned mirror of [dev, dev + n) in a registered arena; null elsewhere (a job on a copy pins its own).
  float* host_of(float* dev, size_t n) {
    for (auto& r : regions_)
      if (dev >= r.dev && dev + n <= r.dev + r.n) return r.host + (dev - r.dev);
    return nullptr;
  }

  // The compute stream's current position, as a point `s` waits for.
  void after_compute(cudaStream_t s) {
    cudaEvent_t e = new_event();
    cudaError_t r1 = cudaEventRecord(e, compute_);
    cudaError_t r2 = r1 == cudaSuccess ? cudaStreamWaitEvent(s, e, 0) : r1;
    cudaEventDestroy(e);  // released once the stream has passed it
    DD_CUDA_CHECK(r2);
  }

  WorkPtr arena_job(JobKind kind, Backend& g, float* p, size_t n, ReduceOp op, int root, int ready_layer) {
    auto j = std::make_shared<Job>();
    j->kind = kind;
    j->g = &g;
    j->dev = p;
    j->n = n;
    j->op = op;
    j->root = root;
    // The gate stream waits for the data to be final (the layer's ready event, or everything issued so far).
    if (ready_layer >= 0) DD_CUDA_CHECK(cudaStreamWaitEvent(gate_, ready_(ready_layer), 0));
    else after_compute(gate_);
    if (kind_ == DeviceCollectives::Staged) {
      j->host = host_of(p, n);
      if (!j->host) {  // an average on a copy (delay=, outer=): a pinned buffer for this job, freed with it
        DD_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&j->owned_host), 4 * n, cudaHostAllocDefault));
        j->host = j->owned_host;
      }
      DD_CUDA_CHECK(cudaMemcpyAsync(j->host, p, 4 * n, cudaMemcpyDeviceToHost, gate_));
      j->h2d = new_event();
    }
    j->gate = new_event();
    DD_CUDA_CHECK(cudaEventRecord(j->gate, gate_));
    push(j);
    return std::make_shared<DeviceWork>(j, this);
  }

  void push(const std::shared_ptr<Job>& j) {
    {
      std::lock_guard<std::mutex> lk(qm_);
      q_.push_back(j);
    }
    qcv_.notify_one();
  }

  void loop() {
    const cudaError_t set = cudaSetDevice(device_);  // the current device is per thread
    for (;;) {
      std::shared_ptr<Job> j;
      {
        std::unique_lock<std::mutex> lk(qm_);
        qcv_.wait(lk, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        j = q_.front();
        q_.pop_front();
      }
      try {
        DD_CUDA_CHECK(set);
        run(*j);
      } catch (...) {
        j->err = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lk(j->m);
        if (j->end_s == 0) j->end_s = now_s();
        j->done = true;
      }
      j->cv.notify_all();
    }
  }

  void run(Job& j) {
    if (j.kind == JobKind::Host) {
      j.inner = j.start();
      return;
    }
    if (j.kind == JobKind::HostAllreduce) {
      if (kind_ == DeviceCollectives::Staged) {
        j.inner = j.g->allreduce(j.host, j.n, j.op);
      } else {
        DD_CUDA_CHECK(cudaMemcpyAsync(j.dev, j.host, 4 * j.n, cudaMemcpyHostToDevice, h2d_));
        DD_CUDA_CHECK(cudaStreamSynchronize(h2d_));
        j.inner = j.g->allreduce(j.dev, j.n, j.op);
      }
      return;
    }
    DD_CUDA_CHECK(cudaEventSynchronize(j.gate));
    if (kind_ == DeviceCollectives::Nccl) {
      j.inner = j.kind == JobKind::Allreduce ? j.g->allreduce(j.dev, j.n, j.op) : j.g->broadcast(j.dev, j.n, j.root);
      return;
    }
    WorkPtr w = j.kind == JobKind::Allreduce ? j.g->allreduce(j.host, j.n, j.op) : j.g->broadcast(j.host, j.n, j.root);
    w->wait();
    j.end_s = w->end_time() > 0 ? w->end_time() : now_s();
    DD_CUDA_CHECK(cudaMemcpyAsync(j.dev, j.host, 4 * j.n, cudaMemcpyHostToDevice, h2d_));
    DD_CUDA_CHECK(cudaEventRecord(j.h2d, h2d_));
  }

  float* take_device(size_t n) {
    std::lock_guard<std::mutex> lk(pool_m_);
    auto it = dev_pool_.lower_bound(n);
    if (it != dev_pool_.end() && it->first == n) {
      float* p = it->second;
      dev_pool_.erase(it);
      return p;
    }
    float* p = nullptr;
    DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 4 * std::max<size_t>(n, 1)));
    return p;
  }
  void give_device(float* p, size_t n) {
    std::lock_guard<std::mutex> lk(pool_m_);
    dev_pool_.emplace(n, p);
  }

  DeviceCollectives kind_;
  cudaStream_t compute_;
  int device_ = 0;
  std::function<cudaEvent_t(int)> ready_;
  cudaStream_t gate_ = nullptr, h2d_ = nullptr, sync_ = nullptr;
  std::vector<Region> regions_;
  float* scratch_ = nullptr;
  size_t scratch_n_ = 0;
  std::mutex pool_m_;
  std::multimap<size_t, float*> dev_pool_;
  std::mutex qm_;
  std::condition_variable qcv_;
  std::deque<std::shared_ptr<Job>> q_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

void DeviceWork::wait() {
  {
    std::unique_lock<std::mutex> lk(j_->m);
    j_->cv.wait(lk, [&] { return j_->done; });
  }
  if (j_->err) std::rethrow_exception(j_->err);
  if (j_->inner) j_->inner->wait();
  if (!finished_) {
    finished_ = true;
    p_->finish(*j_);
  }
}

}  // namespace device

std::unique_ptr<DataPath> make_device_path(DeviceCollectives kind, const Arenas& a, cudaStream_t compute,
                                           std::function<cudaEvent_t(int)> ready_event) {
  return std::make_unique<device::DevicePath>(kind, a, compute, std::move(ready_event));
}

}  // namespace dd::sync
