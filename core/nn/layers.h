// The parameter-owning layer types (Linear, Conv2d, BatchNorm, LayerNorm, Embedding): views plus metadata whose
// forward/backward call the model's kernel table (core/ops/device.h), so one layer runs on the host or a GPU.
#pragma once
#include <memory>

#include "core/nn/layer.h"

namespace dd::nn {

class Linear : public Layer {
 public:
  Linear(int64_t in, int64_t out, bool bias = true) : in(in), out(out), has_bias(bias) {}
  const char* kind() const override { return "linear"; }
  std::vector<TensorSpec> param_specs() const override;
  void init(Rng& rng) override;
  float* weight() const { return p_; }
  float* bias() const { return has_bias ? p_ + in * out : nullptr; }
  float* dweight() const { return g_; }
  float* dbias() const { return has_bias ? g_ + in * out : nullptr; }
  // relu = true applies max(y, 0) inside the GEMM (fused epilogue on the host).
  void forward(float* y, const float* x, int64_t N, bool relu = false) const {
    dev_->linear_forward(y, x, weight(), bias(), N, in, out, relu);
  }
  void backward(float* dx, const float* dy, const float* x, int64_t N) const {
    dev_->linear_backward(dx, dweight(), dbias(), dy, x, weight(), N, in, out);
  }
  int64_t in, out;
  bool has_bias;
  // > 0: weight N(0, init_std), bias 0 (GPT-2's initialization); 0: PyTorch's default (uniform, above).
  float init_std = 0;
};

class Conv : public Layer {
 public:
  Conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) : C(C), OC(OC), k(k), stride(stride), pad(pad) {}
  const char* kind() const override { return "conv"; }
  std::vector<TensorSpec> param_specs() const override { return {{"weight", {OC, C, k, k}}}; }
  void init(Rng& rng) override;
  void forward(float* y, const float* x, int64_t N, int64_t H, int64_t W) const { op_->forward(y, x, p_, N, H, W); }
  void backward(float* dx, const float* dy, const float* x, int64_t N, int64_t H, int64_t W) const {
    op_->backward(dx, g_, dy, x, p_, N, H, W);
  }
  int64_t out_h(int64_t H) const { return (H + 2 * pad - k) / stride + 1; }
  int64_t out_w(int64_t W) const { return (W + 2 * pad - k) / stride + 1; }
  int64_t C, OC, k, stride, pad;

 private:
  void bound() override { op_ = dev_->make_conv(C, OC, k, stride, pad); }
  std::unique_ptr<ops::ConvOp> op_;  // oneDNN or cuDNN state, cached per input shape
};

// BatchNorm over [N, C, HW]; running mean/var are buffers averaged with the layer when it syncs.
class BatchNorm : public Layer {
 public:
  explicit BatchNorm(int64_t C) : C(C) {}
  const char* kind() const override { return "batchnorm"; }
  std::vector<TensorSpec> param_specs() const override { return {{"weight", {C}}, {"bias", {C}}}; }
  std::vector<TensorSpec> buffer_specs() const override { return {{"running_mean", {C}}, {"running_var", {C}}}; }
  void init(Rng& rng) override;
  // Training forward saves batch statistics in this layer (one forward in flight per layer).
  void forward(float* y, const float* x, int64_t N, int64_t HW, bool train);
  void backward(float* dx, const float* dy, const float* x, int64_t N, int64_t HW) const;
  int64_t C;

 private:
  void bound() override { save_mean_ = ops::DeviceFloats(*dev_); save_invstd_ = ops::DeviceFloats(*dev_); }
  ops::DeviceFloats save_mean_, save_invstd_;
};

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t C) : C(C) {}
  const char* kind() const override { return "layernorm"; }
  std::vector<TensorSpec> param_specs() const override { return {{"weight", {C}}, {"bias", {C}}}; }
  void init(Rng& rng) override;
  void forward(float* y, const float* x, int64_t N);
  void backward(float* dx, const float* dy, const float* x, int64_t N) const;
  int64_t C;

 private:
  void bound() override { mean_ = ops::DeviceFloats(*dev_); rstd_ = ops::DeviceFloats(*dev_); }
  ops::DeviceFloats mean_, rstd_;
};

class Embedding : public Layer {
 public:
  Embedding(int64_t V, int64_t C) : V(V), C(C) {}
  const char* kind() const override { return "embedding"; }
  std::vector<TensorSpec> param_specs() const override { return {{"weight", {V, C}}}; }
  void init(Rng& rng) override;
  void forward(float* y, const int32_t* idx, int64_t N) const { dev_->embedding_forward(y, idx, p_, N, C); }
  void backward(const float* dy, const int32_t* idx, int64_t N) const { dev_->embedding_backward(g_, dy, idx, N, C); }
  int64_t V, C;
  float init_std = 1;  // weight N(0, init_std): PyTorch's default 1; GPT-2 uses 0.02
};

// RMSNorm over the last dim (Llama): weight only, eps 1e-5; keeps the saved 1/rms per row in device scratch.
class RMSNorm : public Layer {
 public:
  explicit RMSNorm(int64_t C, float eps = 1e-5f) : C(C), eps(eps) {}
  const char* kind() const override { return "rmsnorm"; }
  std::vector<TensorSpec> param_specs() const override { return {{"weight", {C}}}; }
  void init(Rng& rng) override;
  void forward(float* y, const float* x, int64_t N);
  void backward(float* dx, const float* dy, const float* x, int64_t N) const;
  int64_t C;
  float eps;

 private:
  void bound() override { rstd_ = ops::DeviceFloats(*dev_); }
  ops::DeviceFloats rstd_;
};

}  // namespace dd::nn
