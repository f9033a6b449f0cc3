// Helpers for the dd::cuops kernel tests: device buffers, random host data, and a tolerance comparison that
// names the first mismatching element.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/ops/cuda/ops_cuda.h"

namespace dd::cuops::testing {

#define DD_REQUIRE_GPU() \
  if (!dd::cuops::cuda_available()) GTEST_SKIP() << "no CUDA device"

// Owning device array initialised from (or read back into) a host vector; both copies wait for the whole
// device, so they are ordered with kernels on any stream.
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) { upload(h); }
  ~Dev() {
    if (p_) cudaFree(p_);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void upload(const std::vector<T>& h) {
    DD_CUDA_CHECK(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    // A pageable upload may still be in flight when cudaMemcpy returns; kernels on a non-blocking stream
    // would not wait for it.
    DD_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    DD_CUDA_CHECK(cudaDeviceSynchronize());
    DD_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* get() const { return p_; }
  operator T*() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> randu(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

inline std::vector<int32_t> randi(size_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// |got - ref| <= rtol * (|ref| + rms(ref)) + atol[i]: relative where values are large, scaled by the typical
// magnitude where they cancel to near zero (GEMM and reduction outputs), plus an optional per-element absolute
// bound where the formula itself cancels (atol empty: none).
inline ::testing::AssertionResult near(const std::vector<float>& got, const std::vector<float>& ref, double rtol,
                                       const std::vector<double>& atol = {}) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << ref.size();
  if (!atol.empty() && atol.size() != ref.size())
    return ::testing::AssertionFailure() << "atol has " << atol.size() << " elements, not " << ref.size();
  double ss = 0;
  for (float r : ref) ss += double(r) * r;
  const double rms = ref.empty() ? 0 : std::sqrt(ss / ref.size());
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double(got[i]) - ref[i]);
    const double tol = rtol * (std::fabs(double(ref[i])) + rms) + (atol.empty() ? 0.0 : atol[i]) + 1e-30;
    if (!(err <= tol)) {  // also catches NaN
      if (!bad) first = i;
      ++bad;
    }
    worst = std::max(worst, err / tol);
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << ref.size() << " elements out of tolerance (rtol " << rtol
                                       << ", rms " << rms << "); first at " << first << ": got " << got[first]
                                       << " want " << ref[first] << "; worst err/tol " << worst;
}

}  // namespace dd::cuops::testing
