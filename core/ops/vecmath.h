// Branch-free float exp/erf that GCC auto-vectorizes (libm's expf/erff stay scalar without -ffast-math).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dd::ops::vm {

// Cephes expf: range reduction by ln2, degree-6 polynomial, 2^n built from the exponent bits. Rel. err ~1e-7.
// Inputs are clamped to [-87, 88] so the bit trick never overflows; exp(-87) ~ 1.6e-38 stands in for 0.
inline float exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // Round to nearest by adding 1.5*2^23 (std::floor does not vectorize without -fno-trapping-math).
  float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Abramowitz & Stegun 7.1.26 (the formula PyTorch's vectorized erf uses); absolute error <= 1.5e-7.
inline float erf(float x) {
  float a = std::fabs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float r = 1.0f - p * t * vm::exp(-a * a);
  return std::copysign(r, x);
}

}  // namespace dd::ops::vm
