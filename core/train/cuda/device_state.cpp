// CudaState: DeviceState on one CUDA device (the CUDA kernel table, pinned batch upload, one ready event per
// layer recorded before the engine's hook, the device data path).
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "base/error.h"
#include "core/models/cuda/gpu_model.h"
#include "core/ops/cuda/device_cuda.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/ops/cuda/ops_cuda.h"
#include "core/sync/cuda/device_path.h"
#include "core/train/device_state.h"

namespace dd::train {
namespace {

// A pinned host buffer and its device twin, grown on demand; upload() goes through the pinned one so the copy
// is a real asynchronous DMA on the compute stream.
template <class T>
class Upload {
 public:
  ~Upload() {
    if (host_) cudaFreeHost(host_);
    if (dev_) cudaFree(dev_);
  }
  const T* upload(const std::vector<T>& v) {
    if (v.empty()) return nullptr;
    if (v.size() > cap_) {
      // The previous step's copy finished: its forward read the loss back, which synchronized the stream.
      if (host_) cudaFreeHost(host_);
      if (dev_) cudaFree(dev_);
      host_ = nullptr;
      dev_ = nullptr;
      DD_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(T) * v.size(), cudaHostAllocDefault));
      DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_), sizeof(T) * v.size()));
      cap_ = v.size();
    }
    std::memcpy(host_, v.data(), sizeof(T) * v.size());
    DD_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, sizeof(T) * v.size(), cudaMemcpyHostToDevice, cuops::stream()));
    return dev_;
  }

 private:
  T* host_ = nullptr;
  T* dev_ = nullptr;
  size_t cap_ = 0;
};

// Records layer l's ready event on the compute stream, then calls the engine's hook: the data path's copies and
// collectives wait on that event rather than the host on the device.
class ReadyHook final : public nn::BackwardHook {
 public:
  ~ReadyHook() override {
    for (auto e : ready_) cudaEventDestroy(e);
  }
  void on_layer_ready(int index) override {
    DD_CUDA_CHECK(cudaEventRecord(event(index), cuops::stream()));
    if (inner) inner->on_layer_ready(index);
  }
  // Layer l's event (created on first use; recorded by every backward before the hook).
  cudaEvent_t event(int l) {
    while (ready_.size() <= size_t(l)) {
      cudaEvent_t e;
      DD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      ready_.push_back(e);
    }
    return ready_[size_t(l)];
  }
  nn::BackwardHook* inner = nullptr;

 private:
  std::vector<cudaEvent_t> ready_;
};

class CudaState final : public DeviceState {
 public:
  explicit CudaState(const TrainConfig& cfg) {
    check_cuda_usable();
    int n = 0;
    DD_CUDA_CHECK(cudaGetDeviceCount(&n));
    DD_CUDA_CHECK(cudaSetDevice(cfg.local_rank % n));  // the device NcclBackend picks too
  }

  ops::Device& kernels() override { return cuops::device(); }

  models::Input upload(const data::Batch& b) override {
    models::Input in;
    in.n = b.n;
    in.x = x_.upload(b.xf);
    in.tokens = tok_.upload(b.xi);
    in.y = y_.upload(b.y);
    return in;
  }

  nn::BackwardHook* hook(nn::BackwardHook* engine) override {
    hook_.inner = engine;
    return &hook_;
  }

  std::unique_ptr<sync::DataPath> data_path(const sync::Arenas& a, int layers, Backend& b) override {
    const auto kind = b.collectives_on_device_memory() ? sync::DeviceCollectives::Nccl : sync::DeviceCollectives::Staged;
    for (int l = 0; l < layers; ++l) hook_.event(l);  // all made here: the path's thread only reads them
    ReadyHook* h = &hook_;
    return sync::make_device_path(kind, a, cuops::stream(), [h](int l) { return h->event(l); });
  }

 private:
  ReadyHook hook_;
  Upload<float> x_;
  Upload<int32_t> tok_, y_;
};

}  // namespace

void check_cuda_usable() {
  if (!models::gpu::gpu_available())
    throw UsageError("--device cuda: no CUDA device is visible to this process (use --device cpu)");
}

std::unique_ptr<DeviceState> make_cuda_state(const TrainConfig& cfg) { return std::make_unique<CudaState>(cfg); }

}  // namespace dd::train
