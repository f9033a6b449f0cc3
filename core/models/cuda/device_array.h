// Grow-only device arrays for activations and saved statistics: allocation happens on the first step of a
// shape only, so steady-state steps never call cudaMalloc (which would synchronize the device).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/ops/cuda/cuda_check.h"

namespace dd::models::gpu {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n) { ensure(n); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { std::swap(p_, o.p_); std::swap(n_, o.n_); }
  DeviceArray& operator=(DeviceArray&& o) noexcept { std::swap(p_, o.p_); std::swap(n_, o.n_); return *this; }
  ~DeviceArray() { if (p_) cudaFree(p_); }

  // Grow only; contents unspecified after a growth.
  void ensure(size_t n) {
    if (n <= n_) return;
    if (p_) DD_CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

using DeviceFloats = DeviceArray<float>;

}  // namespace dd::models::gpu
