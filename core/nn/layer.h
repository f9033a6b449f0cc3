// A parameter-owning layer: the unit of synchronization. Its parameters, gradients and buffers are views into
// the model's flat arenas (llm.c style), so adjacent layers are adjacent in memory and buckets need no copies.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  virtual void init(Rng& rng) = 0;            // PyTorch default initialization

  // Set by the model when the arenas are allocated.
  void bind(int index, float* p, float* g, int64_t param_offset, float* buf, int64_t buffer_offset) {
    index_ = index; p_ = p; g_ = g; param_offset_ = param_offset; buf_ = buf; buffer_offset_ = buffer_offset;
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

 protected:
  int index_ = -1;
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
