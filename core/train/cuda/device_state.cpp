// CudaState: DeviceState on one CUDA device (the model built for the CUDA kernel table with its ready events, the
// same optim::Optimizer as on the host, pinned batch upload, the device sync engine).
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "base/error.h"
#include "core/models/cuda/gpu_model.h"
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

class CudaState : public DeviceState {
 public:
  CudaState(const TrainConfig& cfg, const models::Model& m, const optim::OptimConfig& oc) {
    check_cuda_usable();
    int n = 0;
    DD_CUDA_CHECK(cudaGetDeviceCount(&n));
    DD_CUDA_CHECK(cudaSetDevice(cfg.local_rank % n));  // the device NcclBackend picks too
    gpu_ = std::make_unique<models::gpu::GpuModel>(m);
    opt_ = std::make_unique<optim::Optimizer>(oc, gpu_->model());  // state on the device
  }

  models::ForwardResult forward(const data::Batch& b, bool train) override {
    models::Input in;
    in.n = b.n;
    in.x = x_.upload(b.xf);
    in.tokens = tok_.upload(b.xi);
    in.y = y_.upload(b.y);
    return gpu_->forward(in, train);
  }

  void backward(nn::BackwardHook* hook) override { gpu_->backward(hook); }

  void update_layer(int layer, float lr) override { opt_->update_layer(layer, lr); }

  void params_to_host(models::Model& m) override { gpu_->model().copy_params_to(m); }

  // The one optimizer's state and step counters travel both ways, so an AdamW checkpoint resumes on the GPU.
  void to_host(models::Model& m, optim::Optimizer& o) override {
    gpu_->model().copy_params_to(m);
    opt_->copy_state_to(o);
  }

  void from_host(const models::Model& m, optim::Optimizer& o) override {
    m.copy_params_to(gpu_->model());
    o.copy_state_to(*opt_);
  }

  std::unique_ptr<sync::SyncEngine> make_engine(const sync::EngineOptions& eo, models::Model& m,
                                                Backend& b) override {
    models::Model& dm = gpu_->model();
    sync::Arenas a;
    a.params = dm.params().data();
    a.grads = dm.grads().data();
    a.buffers = dm.buffers().data();
    a.opt_state = opt_->state().data();
    a.num_params = dm.num_params();
    a.num_buffers = dm.num_buffers();
    a.state_slots = opt_->state_slots();
    const auto kind = b.name() == "nccl" ? sync::DeviceCollectives::Nccl : sync::DeviceCollectives::Staged;
    models::gpu::GpuModel* g = gpu_.get();
    auto path = sync::make_device_path(kind, a, cuops::stream(), [g](int l) { return g->layer_ready_event(l); });
    return sync::make_layer_sync(eo, sync::layer_table(m), a, std::move(path), b);
  }

 private:
  std::unique_ptr<models::gpu::GpuModel> gpu_;
  std::unique_ptr<optim::Optimizer> opt_;  // after gpu_: it refers to the device model
  Upload<float> x_;
  Upload<int32_t> tok_, y_;
};

}  // namespace

void check_cuda_usable() {
  if (!models::gpu::gpu_available())
    throw UsageError("--device cuda: no CUDA device is visible to this process (use --device cpu)");
}

std::unique_ptr<DeviceState> make_device_state(const TrainConfig& cfg, const models::Model& m,
                                               const optim::OptimConfig& oc) {
  return std::make_unique<CudaState>(cfg, m, oc);
}

}  // namespace dd::train
