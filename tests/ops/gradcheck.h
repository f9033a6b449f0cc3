// Test helpers: random tensors and a central-difference gradient check of loss = sum(out * R).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace dd::test {

inline std::vector<float> randn(int64_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(r);
  return v;
}

// Values with pairwise gaps >= `gap` and |v| >= gap/2 (a shuffled ramp), so kinks (max, relu) stay outside [x-h, x+h].
inline std::vector<float> spaced(int64_t n, unsigned seed, float gap) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i - n / 2) + 0.5f) * gap;  // never 0, |v| >= gap/2
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

// sum(out * R) in double: the scalar "loss" whose gradient wrt out is exactly R.
inline double dot(const std::vector<float>& out, const std::vector<float>& R) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * R[i];
  return s;
}

// Compares `analytic` (d loss / d p) with (loss(p+h) - loss(p-h)) / 2h on up to max_checks elements of p.
// Passes when |a - n| <= rtol * max(|a|, |n|) + atol * max|analytic|, i.e. relative error with a floor that
// scales with the gradient's size (float rounding noise in the loss is amplified by 1/h).
inline void check_grad(const std::string& what, std::vector<float>& p, const std::vector<float>& analytic,
                       const std::function<double()>& loss, float h = 1e-2f, double rtol = 2e-2,
                       double atol = 2e-3, int max_checks = 150) {
  ASSERT_EQ(p.size(), analytic.size()) << what;
  double gmax = 0;
  for (float a : analytic) gmax = std::max(gmax, std::fabs(static_cast<double>(a)));
  std::vector<size_t> idx(p.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (static_cast<int>(idx.size()) > max_checks) {
    std::shuffle(idx.begin(), idx.end(), std::mt19937(1234));
    idx.resize(static_cast<size_t>(max_checks));
  }
  int bad = 0;
  for (size_t i : idx) {
    const float orig = p[i];
    p[i] = orig + h;
    const double lp = loss();
    p[i] = orig - h;
    const double lm = loss();
    p[i] = orig;
    const double num = (lp - lm) / (2.0 * h), a = analytic[i];
    const double tol = rtol * std::max(std::fabs(a), std::fabs(num)) + atol * gmax + 1e-6;
    if (std::fabs(a - num) > tol && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << " vs numeric " << num << " (tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << idx.size() << " elements off";
  EXPECT_GT(gmax, 0.0) << what << ": gradient is identically zero, the check would be vacuous";
}

// Parameter grads accumulate (+=): start them at this value and subtract it afterwards, testing both at once.
constexpr float kPrefill = 0.25f;
inline std::vector<float> prefilled(size_t n) { return std::vector<float>(n, kPrefill); }
inline std::vector<float> minus_prefill(std::vector<float> g) {
  for (auto& x : g) x -= kPrefill;
  return g;
}

}  // namespace dd::test
