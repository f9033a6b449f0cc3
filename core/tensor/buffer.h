// 64-byte aligned float storage: the backing of the parameter, gradient, buffer and optimizer-state arenas.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace dd {

class FloatBuffer {
 public:
  FloatBuffer() = default;
  explicit FloatBuffer(size_t n) { resize(n); }
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  FloatBuffer(FloatBuffer&& o) noexcept { swap(o); }
  FloatBuffer& operator=(FloatBuffer&& o) noexcept { swap(o); return *this; }
  ~FloatBuffer() { std::free(p_); }

  // Zero-filled; old contents are discarded.
  void resize(size_t n) {
    if (n == n_) { zero(); return; }
    std::free(p_);
    p_ = nullptr;
    n_ = n;
    if (n == 0) return;
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p_) throw std::bad_alloc();
    zero();
  }
  // Grow only (keeps the pointer when large enough); contents unspecified.
  void ensure(size_t n) { if (n > n_) resize(n); }
  void zero() { if (n_) std::memset(p_, 0, n_ * sizeof(float)); }
  float* data() { return p_; }
  const float* data() const { return p_; }
  size_t size() const { return n_; }
  float& operator[](size_t i) { return p_[i]; }
  const float& operator[](size_t i) const { return p_[i]; }

 private:
  void swap(FloatBuffer& o) { std::swap(p_, o.p_); std::swap(n_, o.n_); }
  float* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace dd
