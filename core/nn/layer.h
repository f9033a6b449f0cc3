// A parameter-owning layer: the unit of synchronization. Its parameters, gradients and buffers are views into
// the model's flat arenas (llm.c style), so adjacent layers are adjacent in memory and buckets need no copies.
// The views live on the model's device; the layer's kernels go through that device's table (core/ops/device.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/ops/device.h"
#include "core/tensor/rng.h"

namespace dd::nn {

struct TensorSpec {
  std::string name;              // "weight", "bias", "running_mean", ...
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual const char* kind() const = 0;      // "linear", "conv", "batchnorm", "layernorm", "embedding"
  virtual std::vector<TensorSpec> param_specs() const = 0;   // weight then bias
  virtual std::vector<TensorSpec> buffer_specs() const { return {}; }
  virtual void init(Rng& rng) = 0;            // PyTorch default initialization, on HOST views (before upload)

  // Set by the model when the arenas are allocated (again when they move to the model's device).
  void bind(int index, ops::Device& dev, float* p, float* g, int64_t param_offset, float* buf,
            int64_t buffer_offset) {
    index_ = index; dev_ = &dev; p_ = p; g_ = g; param_offset_ = param_offset; buf_ = buf;
    buffer_offset_ = buffer_offset;
    bound();
  }
  int64_t num_params() const { int64_t n = 0; for (auto& s : param_specs()) n += s.numel(); return n; }
  int64_t num_buffers() const { int64_t n = 0; for (auto& s : buffer_specs()) n += s.numel(); return n; }

  std::string name;          // dotted, e.g. "stage2.1.conv1", "blocks.2.attn.qkv"
  int index() const { return index_; }
  float* params() const { return p_; }
  float* grads() const { return g_; }
  float* buffers() const { return buf_; }
  int64_t param_offset() const { return param_offset_; }
  int64_t buffer_offset() const { return buffer_offset_; }
  ops::Device& device() const { return *dev_; }

 protected:
  virtual void bound() {}  // after bind: device-side state (a conv op, saved statistics) moves to dev_
  int index_ = -1;
  ops::Device* dev_ = &ops::host_device();
  float* p_ = nullptr;
  float* g_ = nullptr;
  float* buf_ = nullptr;
  int64_t param_offset_ = 0;
  int64_t buffer_offset_ = 0;
};

// Called by a model's backward right after layer `index` has produced its final gradients, in strictly
// decreasing index order. The sync engine implements it; a null hook costs one branch.
class BackwardHook {
 public:
  virtual ~BackwardHook() = default;
  virtual void on_layer_ready(int index) = 0;
};

}  // namespace dd::nn
