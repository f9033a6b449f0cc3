// Internal to GpuModel: device views of the parameter-owning layers and the per-architecture forward/backward,
// each written out with dd::cuops calls mirroring the CPU model's source one-to-one (same ops, same order).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/models/cuda/device_array.h"
#include "core/models/model.h"
#include "core/ops/cuda/ops_cuda.h"

namespace dd::models::gpu {

// Base pointers of the device arenas; a layer's views are base + its CPU offsets.
struct DeviceArenas {
  float* params = nullptr;
  float* grads = nullptr;
  float* buffers = nullptr;
};

struct DevLinear {
  DevLinear(const nn::Layer* cpu, const DeviceArenas& a);
  int index;
  int64_t in, out;
  float *W, *b, *dW, *db;  // b, db null without bias
  void forward(float* y, const float* x, int64_t N) const { cuops::linear_forward(y, x, W, b, N, in, out); }
  void backward(float* dx, const float* dy, const float* x, int64_t N) const {
    cuops::linear_backward(dx, dW, db, dy, x, W, N, in, out);
  }
};

struct DevLayerNorm {
  DevLayerNorm(const nn::Layer* cpu, const DeviceArenas& a);
  int index;
  int64_t C;
  float *w, *b, *dw, *db;
  DeviceFloats mean, rstd;  // saved by the training forward for backward, as nn::LayerNorm keeps them
  void forward(float* y, const float* x, int64_t N) {
    mean.ensure(size_t(N));
    rstd.ensure(size_t(N));
    cuops::layernorm_forward(y, mean.data(), rstd.data(), x, w, b, N, C);
  }
  void backward(float* dx, const float* dy, const float* x, int64_t N) const {
    cuops::layernorm_backward(dx, dw, db, dy, x, w, mean.data(), rstd.data(), N, C);
  }
};

struct DevEmbedding {
  DevEmbedding(const nn::Layer* cpu, const DeviceArenas& a);
  int index;
  int64_t V, C;
  float *W, *dW;
  void forward(float* y, const int32_t* idx, int64_t N) const { cuops::embedding_forward(y, idx, W, N, C); }
  void backward(const float* dy, const int32_t* idx, int64_t N) const {
    cuops::embedding_backward(dW, dy, idx, N, C);
  }
};

struct DevConv {
  DevConv(const nn::Layer* cpu, const DeviceArenas& a);
  int index;
  int64_t C, OC;
  float *w, *dw;
  std::unique_ptr<cuops::Conv2d> op;  // cuDNN descriptors and workspace, cached per input shape
  void forward(float* y, const float* x, int64_t N, int64_t H, int64_t W) { op->forward(y, x, w, N, H, W); }
  void backward(float* dx, const float* dy, const float* x, int64_t N, int64_t H, int64_t W) {
    op->backward(dx, dw, dy, x, w, N, H, W);
  }
};

// Running mean/var live in the buffers arena (averaged with the layer when it syncs), as on the CPU.
struct DevBatchNorm {
  DevBatchNorm(const nn::Layer* cpu, const DeviceArenas& a);
  int index;
  int64_t C;
  float *gamma, *beta, *dgamma, *dbeta, *running_mean, *running_var;
  DeviceFloats save_mean, save_invstd;
  void forward(float* y, const float* x, int64_t N, int64_t HW, bool train) {
    if (train) {
      save_mean.ensure(size_t(C));
      save_invstd.ensure(size_t(C));
      cuops::batchnorm_forward_train(y, save_mean.data(), save_invstd.data(), running_mean, running_var, x, gamma,
                                     beta, N, C, HW);
    } else {
      cuops::batchnorm_forward_eval(y, x, gamma, beta, running_mean, running_var, N, C, HW);
    }
  }
  void backward(float* dx, const float* dy, const float* x, int64_t N, int64_t HW) const {
    cuops::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean.data(), save_invstd.data(), N, C, HW);
  }
};

class GpuArch {
 public:
  virtual ~GpuArch() = default;
  virtual ForwardResult forward(const Input& in, bool train) = 0;
  virtual void backward(nn::BackwardHook* hook, float scale) = 0;
  // Set by GpuModel: one event per layer, recorded on the compute stream when the layer's gradient is final.
  void set_ready_events(const std::vector<cudaEvent_t>* ev) { ready_ = ev; }

 protected:
  void notify(nn::BackwardHook* h, int index) const {
    DD_CUDA_CHECK(cudaEventRecord((*ready_)[size_t(index)], cuops::stream()));
    if (h) h->on_layer_ready(index);
  }

 private:
  const std::vector<cudaEvent_t>* ready_ = nullptr;
};

std::unique_ptr<GpuArch> make_gpu_mlp(const Model& cpu, const DeviceArenas& a);
std::unique_ptr<GpuArch> make_gpu_cnn(const Model& cpu, const DeviceArenas& a);
std::unique_ptr<GpuArch> make_gpu_gpt_mini(const Model& cpu, const DeviceArenas& a);

}  // namespace dd::models::gpu
