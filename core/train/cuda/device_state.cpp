// CudaState: DeviceState on one CUDA device (GpuModel + pinned batch upload + the device sync engine).
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "core/common/error.h"
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
  CudaState(const TrainConfig& cfg, const models::Model& m, const optim::OptimConfig& oc) : oc_(oc) {
    check_cuda_usable();
    int n = 0;
    DD_CUDA_CHECK(cudaGetDeviceCount(&n));
    DD_CUDA_CHECK(cudaSetDevice(cfg.local_rank % n));  // the device NcclBackend picks too
    gpu_ = std::make_unique<models::gpu::GpuModel>(m, oc);
    steps_.assign(size_t(gpu_->num_layers()), 0);
    num_buffers_ = int64_t(const_cast<models::Model&>(m).buffers().size());
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

  void update_layer(int layer, float lr) override {
    gpu_->update_layer(layer, lr);
    ++steps_[size_t(layer)];
  }

  void params_to_host(models::Model& m) override { gpu_->copy_params_to_host(m); }

  void to_host(models::Model& m, optim::Optimizer& o) override {
    gpu_->copy_params_to_host(m);
    check_state_size(o);
    DD_CUDA_CHECK(cudaMemcpyAsync(o.state().data(), gpu_->optimizer_state(), 4 * o.state().size(), cudaMemcpyDeviceToHost,
                          cuops::stream()));
    gpu_->synchronize();
    o.layer_steps() = steps_;
  }

  void from_host(const models::Model& m, optim::Optimizer& o) override {
    if (oc_.kind == "adamw" && o.layer_steps() != steps_)
      throw UsageError("--resume with --device cuda: AdamW's per-layer step counters cannot be restored on the "
                       "GPU model yet; resume this checkpoint with --device cpu or train with --optimizer sgd");
    gpu_->copy_params_from_host(m);
    check_state_size(o);
    DD_CUDA_CHECK(cudaMemcpyAsync(gpu_->optimizer_state(), o.state().data(), 4 * o.state().size(), cudaMemcpyHostToDevice,
                          cuops::stream()));
    gpu_->synchronize();
    steps_ = o.layer_steps();
  }

  std::unique_ptr<sync::SyncEngine> make_engine(const sync::EngineOptions& eo, models::Model& m,
                                                Backend& b) override {
    sync::Arenas a;
    a.params = gpu_->params();
    a.grads = gpu_->grads();
    a.buffers = gpu_->buffers();
    a.opt_state = gpu_->optimizer_state();
    a.num_params = gpu_->num_params();
    a.num_buffers = num_buffers_;
    a.state_slots = oc_.kind == "adamw" ? 2 : 1;
    const auto kind = b.name() == "nccl" ? sync::DeviceCollectives::Nccl : sync::DeviceCollectives::Staged;
    models::gpu::GpuModel* g = gpu_.get();
    auto path = sync::make_device_path(kind, a, cuops::stream(), [g](int l) { return g->layer_ready_event(l); });
    return sync::make_layer_sync(eo, m, a, std::move(path), b);
  }

 private:
  void check_state_size(optim::Optimizer& o) const {
    const size_t want = size_t(gpu_->num_params()) * (oc_.kind == "adamw" ? 2 : 1);
    if (o.state().size() != want) throw std::logic_error("device state: optimizer state sizes differ");
  }

  optim::OptimConfig oc_;
  std::unique_ptr<models::gpu::GpuModel> gpu_;
  std::vector<int64_t> steps_;
  int64_t num_buffers_ = 0;
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
