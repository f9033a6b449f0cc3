// GpuModel: the device model from make_model(..., cuops::device()), and the ready-event hook adapter.
#include "core/models/cuda/gpu_model.h"

#include "base/error.h"
#include "core/ops/cuda/device_cuda.h"
#include "core/ops/cuda/ops_cuda.h"

namespace dd::models::gpu {

bool gpu_available() { return cuops::cuda_available(); }

// Records layer l's event on the compute stream, then forwards to the sync engine's hook: models need no event
// code of their own.
class GpuModel::ReadyHook final : public nn::BackwardHook {
 public:
  explicit ReadyHook(const std::vector<cudaEvent_t>& ev) : ev_(ev) {}
  void on_layer_ready(int index) override {
    DD_CUDA_CHECK(cudaEventRecord(ev_[size_t(index)], cuops::stream()));
    if (inner) inner->on_layer_ready(index);
  }
  nn::BackwardHook* inner = nullptr;

 private:
  const std::vector<cudaEvent_t>& ev_;
};

GpuModel::GpuModel(const Model& host) {
  if (!gpu_available()) throw UsageError("--device cuda: no CUDA device is visible to this process");
  model_ = make_model(host.name(), 0, cuops::device());
  host.copy_params_to(*model_);
  ready_.resize(size_t(model_->num_layers()));
  for (auto& e : ready_) DD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  hook_ = std::make_unique<ReadyHook>(ready_);
}

GpuModel::~GpuModel() {
  hook_.reset();
  model_.reset();
  for (auto e : ready_) cudaEventDestroy(e);
}

void GpuModel::backward(nn::BackwardHook* hook, float scale) {
  hook_->inner = hook;
  model_->backward(hook_.get(), scale);
  hook_->inner = nullptr;
}

void GpuModel::synchronize() const { DD_CUDA_CHECK(cudaStreamSynchronize(cuops::stream())); }

}  // namespace dd::models::gpu
