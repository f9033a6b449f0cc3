// A collective of the device data path between its submission and its completion (device_path.cpp): the Job
// the staging thread and the Work handle share, and that Work handle.
#pragma once
#include <cuda_runtime.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/sync/types/data_path.h"

namespace dd::sync::device {

inline cudaEvent_t new_event() {
  cudaEvent_t e;
  DD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

enum class JobKind { Allreduce, Broadcast, HostAllreduce, Host };

// One collective between its submission and its completion; shared by the staging thread and the Work.
struct Job {
  JobKind kind;
  Backend* g;
  float* dev = nullptr;   // arena slice (device), or the device copy of a host vector (Nccl HostAllreduce)
  float* host = nullptr;  // pinned mirror slice (Staged), or the caller's host vector (HostAllreduce)
  size_t n = 0;
  ReduceOp op = ReduceOp::Avg;
  int root = 0;
  std::function<WorkPtr()> start;  // Host: host work issuing backend collectives, run in queue order
  cudaEvent_t gate = nullptr;  // data final on the device (Nccl) / copied to the pinned mirror (Staged)
  cudaEvent_t h2d = nullptr;   // Staged: the result is back in the arena
  float* owned_host = nullptr; // Staged, memory outside the arenas: the job's own pinned buffer

  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr err;
  WorkPtr inner;  // the backend's handle
  double end_s = 0;

  ~Job() {
    if (gate) cudaEventDestroy(gate);
    if (h2d) cudaEventDestroy(h2d);
    if (owned_host) cudaFreeHost(owned_host);  // synchronizes with the device: its H2D copy has ended
  }
};

class DevicePath;

class DeviceWork : public Work {
 public:
  DeviceWork(std::shared_ptr<Job> j, DevicePath* p) : j_(std::move(j)), p_(p) {}
  void wait() override;
  bool test() override {
    std::lock_guard<std::mutex> lk(j_->m);
    if (!j_->done) return false;
    return j_->err || !j_->inner || j_->inner->test();
  }
  double end_time() const override {
    if (j_->inner && j_->inner->end_time() > 0) return j_->inner->end_time();
    return j_->end_s;
  }

 private:
  std::shared_ptr<Job> j_;
  DevicePath* p_;
  bool finished_ = false;
};

}  // namespace dd::sync::device
