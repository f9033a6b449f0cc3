// What an optimizer updates: flat parameter and gradient arenas of one layout, cut into layers. models::Model
// implements it, so the optimizer needs nothing from core/models (the dependency is models -> optim, never back).
#pragma once
#include <cstdint>

#include "core/ops/device.h"

namespace dd::optim {

// One layer's slice of the arenas (device pointers on a GPU table): params[0, count) and grads[0, count) at `offset` floats into the arenas.
struct LayerSlice {
  float* params = nullptr;
  float* grads = nullptr;
  int64_t offset = 0;
  int64_t count = 0;
};

class ParamTable {
 public:
  virtual int64_t num_params() const = 0;  // floats in the parameter arena (= the gradient arena)
  virtual int num_layers() const = 0;
  virtual LayerSlice layer_slice(int layer) const = 0;
  // Where the arenas live; the optimizer keeps its state there and updates through this device's table.
  virtual ops::Device& device() const { return ops::host_device(); }

 protected:
  ~ParamTable() = default;  // not owned through this interface
};

}  // namespace dd::optim
