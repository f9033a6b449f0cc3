// RMSNorm, RoPE and SwiGLU (the Llama kernels): forward against a straightforward double reference, and the
// analytic backward against central differences of that double reference (h = 1e-4: truncation ~h^2 and
// rounding ~1e-16/h, both far below float), so the tolerance is float rounding of the kernel alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {

using DVec = std::vector<double>;
DVec to_d(const std::vector<float>& v) { return DVec(v.begin(), v.end()); }

// |got - ref| <= k * FLT_EPSILON * (|ref| + rms(ref)) for every element; k is the operation count that bounds
// the float rounding of one output (given by each caller from its computation).
void expect_close(const char* what, const std::vector<float>& got, const DVec& ref, double k) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double ss = 0;
  for (double r : ref) ss += r * r;
  const double rms = std::sqrt(ss / double(ref.size()));
  ASSERT_GT(rms, 0.0) << what << ": reference is identically zero, the check would be vacuous";
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = k * FLT_EPSILON * (std::fabs(ref[i]) + rms);
    if (!(std::fabs(got[i] - ref[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << ref[i] << " (tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what;
}

// Checks `analytic` = d/dp of loss(p) = sum(f(p) * R) against central differences in double on up to 200
// sampled elements of p, with expect_close's tolerance (k float operations per element).
void fd_check(const char* what, const std::vector<float>& analytic, DVec p,
              const std::function<double(const DVec&)>& loss, double k) {
  std::vector<size_t> idx(p.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (idx.size() > 200) {
    std::shuffle(idx.begin(), idx.end(), std::mt19937(99));
    idx.resize(200);
  }
  std::vector<float> got;
  DVec num;
  for (size_t i : idx) {
    const double o = p[i], h = 1e-4 * std::max(1.0, std::fabs(o));
    p[i] = o + h;
    const double lp = loss(p);
    p[i] = o - h;
    const double lm = loss(p);
    p[i] = o;
    num.push_back((lp - lm) / (2 * h));
    got.push_back(analytic[i]);
  }
  expect_close(what, got, num, k);
}

double dotd(const DVec& a, const std::vector<float>& R) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * R[i];
  return s;
}

// ---- RMSNorm ----
DVec rms_ref(const DVec& x, const DVec& w, int64_t N, int64_t C) {
  DVec y(x.size());
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t i = 0; i < C; ++i) ss += x[n * C + i] * x[n * C + i];
    const double r = 1.0 / std::sqrt(ss / double(C) + 1e-5);
    for (int64_t i = 0; i < C; ++i) y[n * C + i] = x[n * C + i] * r * w[i];
  }
  return y;
}

void rms_case(int64_t N, int64_t C) {
  SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
  auto x = randn(N * C, 21, 1.5f), w = randn(C, 22), R = randn(N * C, 23);
  std::vector<float> y(x.size()), rstd(N), dx(x.size());
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C);
  const DVec xd = to_d(x), wd = to_d(w);
  // A float sum of C squares (relative error <= C u), a sqrt and three products.
  expect_close("rmsnorm y", y, rms_ref(xd, wd, N, C), double(C) + 8);
  auto dw = prefilled(C);
  rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  // Backward: a C-term dot product per row, and N-term sums for dw.
  fd_check("rmsnorm dx", dx, xd, [&](const DVec& p) { return dotd(rms_ref(p, wd, N, C), R); }, 2.0 * double(C) + 16);
  fd_check("rmsnorm dw", minus_prefill(dw), wd, [&](const DVec& p) { return dotd(rms_ref(xd, p, N, C), R); },
           double(N + C) + 16);
  // A null dx is "not needed": dw alone.
  auto dw2 = prefilled(C);
  rmsnorm_backward(nullptr, dw2.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  EXPECT_EQ(dw2, dw);
}

// ---- RoPE ----
// Rotates pair (2i, 2i+1) of every head by t * base^(-2i/hd), t = row % T; columns past NH*hd untouched.
DVec rope_ref(const DVec& x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, double sign = 1) {
  DVec y = x;
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double ang = sign * double(r % T) * std::pow(10000.0, -2.0 * double(i) / double(hd));
        const size_t k = size_t(r * ld + h * hd + 2 * i);
        y[k] = x[k] * std::cos(ang) - x[k + 1] * std::sin(ang);
        y[k + 1] = x[k] * std::sin(ang) + x[k + 1] * std::cos(ang);
      }
  return y;
}

void rope_case(int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
               " hd=" + std::to_string(hd) + " ld=" + std::to_string(ld));
  const int64_t n = B * T * ld;
  auto x = randn(n, 31), R = randn(n, 32);
  auto y = x;
  rope_forward(y.data(), B, T, NH, hd, ld);
  const DVec xd = to_d(x);
  // cos/sin rounded once to float, two products and a sum.
  expect_close("rope y", y, rope_ref(xd, B, T, NH, hd, ld), 8);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = NH * hd; j < ld; ++j) EXPECT_EQ(y[size_t(r * ld + j)], x[size_t(r * ld + j)]) << "col " << j;
  auto d = R;
  rope_backward(d.data(), B, T, NH, hd, ld);
  fd_check("rope dx", d, xd, [&](const DVec& p) { return dotd(rope_ref(p, B, T, NH, hd, ld), R); }, 8);
  // The backward is the inverse rotation: forward then backward gives x back.
  rope_backward(y.data(), B, T, NH, hd, ld);
  expect_close("rope backward(forward(x))", y, xd, 16);
}

// ---- SwiGLU ----
DVec swiglu_ref(const DVec& gu, int64_t N, int64_t F) {
  DVec y(size_t(N * F));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < F; ++i) {
      const double g = gu[size_t(n * 2 * F + i)], u = gu[size_t(n * 2 * F + F + i)];
      y[size_t(n * F + i)] = g / (1 + std::exp(-g)) * u;
    }
  return y;
}

void swiglu_case(int64_t N, int64_t F) {
  SCOPED_TRACE("N=" + std::to_string(N) + " F=" + std::to_string(F));
  auto gu = randn(N * 2 * F, 41, 2.f), R = randn(N * F, 42);
  std::vector<float> y(size_t(N * F)), dgu(gu.size());
  swiglu_forward(y.data(), gu.data(), N, F);
  const DVec gd = to_d(gu);
  // exp with relative error ~1e-7 (about 2 u), a division and a product.
  expect_close("swiglu y", y, swiglu_ref(gd, N, F), 16);
  swiglu_backward(dgu.data(), R.data(), gu.data(), N, F);
  fd_check("swiglu dgu", dgu, gd, [&](const DVec& p) { return dotd(swiglu_ref(p, N, F), R); }, 32);
  // In place (dgu aliasing gu) gives the same gradient.
  auto alias = gu;
  swiglu_backward(alias.data(), R.data(), alias.data(), N, F);
  EXPECT_EQ(alias, dgu);
}

}  // namespace

TEST(RmsNorm, SmallOdd) { rms_case(5, 7); }
TEST(RmsNorm, Wider) { rms_case(3, 64); }
TEST(RmsNorm, ThreadedSize) {  // crosses the parallel-over-rows threshold; forward only (the backward is serial)
  const int64_t N = 300, C = 256;
  auto x = randn(N * C, 24), w = randn(C, 25);
  std::vector<float> y(x.size()), rstd(N);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C);
  expect_close("rmsnorm y", y, rms_ref(to_d(x), to_d(w), N, C), double(C) + 8);
}

TEST(Rope, PairsAndAnglesAsThePaperModel) {
  // hd = 4 at t = 1: pair (0,1) turns by 1 rad, pair (2,3) by 10000^(-1/2) = 0.01 rad; t = 0 is the identity.
  std::vector<float> x{1, 2, 3, 4, 1, 0, 0, 1};
  rope_forward(x.data(), 1, 2, 1, 4, 4);
  const std::vector<float> want{1, 2, 3, 4, float(std::cos(1.0)), float(std::sin(1.0)), float(-std::sin(0.01)),
                                float(std::cos(0.01))};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 2 * FLT_EPSILON) << i;
}
TEST(Rope, OneHeadTight) { rope_case(1, 5, 1, 8, 8); }
TEST(Rope, HeadsInAWiderRow) { rope_case(2, 7, 3, 6, 3 * 6 * 3); }  // q|k rotated inside a q|k|v row
TEST(Rope, ThreadedSize) { rope_case(1, 128, 4, 32, 3 * 128); }

TEST(SwiGlu, Small) { swiglu_case(3, 5); }
TEST(SwiGlu, ThreadedSize) { swiglu_case(64, 1100); }
