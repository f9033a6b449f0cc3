// GpuModel: a CPU reference model's step (forward, backward with the per-layer hook, per-layer optimizer
// update) on one CUDA device, over device arenas with exactly the CPU model's layout (same per-layer offsets).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/models/model.h"
#include "core/optim/optimizer.h"

namespace dd::models::gpu {

class GpuArch;  // per-architecture forward/backward (gpu_arch.h)

// True when the CUDA runtime sees at least one device.
bool gpu_available();

class GpuModel {
 public:
  // Copies cpu's parameters and buffers to the current device. The CPU model is only read here; it may be
  // destroyed afterwards. Throws dd::UsageError for a model without a GPU path (today: mlp, cnn, gpt-mini).
  explicit GpuModel(const Model& cpu, const optim::OptimConfig& opt = {});
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  const std::string& name() const { return name_; }
  int num_layers() const { return int(offsets_.size()); }
  int64_t num_params() const { return num_params_; }

  // Device arenas (the CPU layout). Layer l's parameters are params() + param_offset(l), param_count(l) floats.
  float* params() { return params_; }
  float* grads() { return grads_; }
  float* buffers() { return buffers_; }
  float* optimizer_state() { return state_; }  // SGD momentum [P]; AdamW m [P] then v [P]
  int64_t param_offset(int layer) const { return offsets_[size_t(layer)]; }
  int64_t param_count(int layer) const { return counts_[size_t(layer)]; }

  // Forward with loss; `in` holds DEVICE pointers (x or tokens, and y). The loss (and correct count) is the
  // only device-to-host copy of a step.
  ForwardResult forward(const Input& in, bool train);
  // Backward of the last training forward; grads() must be zero on entry (update_layer zeroes each layer).
  // The hook is called after each layer's kernels are enqueued, in strictly decreasing index order; the
  // layer's gradient is final once layer_ready_event(l) (recorded just before the call) has completed, so a
  // communication stream waits on that event rather than the host on the device.
  void backward(nn::BackwardHook* hook, float scale = 1.0f);
  cudaEvent_t layer_ready_event(int layer) const { return ready_[size_t(layer)]; }
  // theta_l <- theta_l - lr * update(g_l) with device optimizer state, then zeroes g_l (as optim::Optimizer).
  void update_layer(int layer, float lr);
  void zero_grads();

  // Synchronizing copies for checkpoints, evaluation on the host, and tests.
  void copy_params_to_host(Model& cpu) const;   // parameters and buffers
  void copy_grads_to_host(Model& cpu) const;
  void copy_params_from_host(const Model& cpu); // parameters and buffers
  void synchronize() const;

 private:
  std::string name_;
  optim::OptimConfig opt_;
  int64_t num_params_ = 0, num_buffers_ = 0;
  std::vector<int64_t> offsets_, counts_, steps_;
  std::vector<cudaEvent_t> ready_;
  float *params_ = nullptr, *grads_ = nullptr, *buffers_ = nullptr, *state_ = nullptr;
  std::unique_ptr<GpuArch> arch_;
};

}  // namespace dd::models::gpu
