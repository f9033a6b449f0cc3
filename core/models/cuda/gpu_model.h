// GpuModel: a reference model built for the CUDA kernel table (the same source as on the host) plus one ready
// event per layer, recorded on the compute stream when the layer's gradient is final, for the device sync path.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/models/model.h"

namespace dd::models::gpu {

// True when the CUDA runtime sees at least one device.
bool gpu_available();

class GpuModel {
 public:
  // Builds `host`'s architecture on the current CUDA device and copies its parameters and buffers there. The
  // host model is only read here; it may be destroyed afterwards. Every model has a GPU path.
  explicit GpuModel(const Model& host);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // The device model: arenas in device memory with the host layout, an optim::ParamTable on the CUDA device.
  Model& model() { return *model_; }
  int num_layers() const { return model_->num_layers(); }
  int64_t num_params() const { return model_->num_params(); }

  // Forward with loss; `in` holds DEVICE pointers. The loss (and correct count) is the only device-to-host copy.
  ForwardResult forward(const Input& in, bool train) { return model_->forward(in, train); }
  // Backward of the last training forward; the hook is called after each layer's kernels are enqueued, in
  // strictly decreasing index order, right after layer_ready_event(l) is recorded on the compute stream, so a
  // communication stream waits on that event rather than the host on the device.
  void backward(nn::BackwardHook* hook, float scale = 1.0f);
  cudaEvent_t layer_ready_event(int layer) const { return ready_[size_t(layer)]; }
  void synchronize() const;

 private:
  class ReadyHook;
  std::unique_ptr<Model> model_;
  std::vector<cudaEvent_t> ready_;
  std::unique_ptr<ReadyHook> hook_;
};

}  // namespace dd::models::gpu
