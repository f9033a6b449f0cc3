// Llama decoder kernels: RMSNorm (weight only), rotary position embedding (pairs 2i/2i+1), SwiGLU gating.
// Plain loops the compiler vectorizes; threaded over rows when large (docs/models.md, "GPT-2 and Llama").
#include <cmath>
#include <vector>

#include "core/ops/ops.h"
#include "core/ops/vecmath.h"

namespace dd::ops {

namespace {
constexpr int64_t kParallelMin = 1 << 16;

// cos/sin of t * base^(-2i/hd) for t < T, i < hd/2, computed in double and rounded once; cached per shape
// (one table per thread: the kernels may run on several ranks' threads at once).
struct RopeTable {
  int64_t T = -1, half = -1;
  float base = 0;
  std::vector<float> c, s;
  const RopeTable& get(int64_t T_, int64_t hd, float base_) {
    if (T_ == T && hd / 2 == half && base_ == base) return *this;
    T = T_, half = hd / 2, base = base_;
    c.resize(size_t(T * half));
    s.resize(size_t(T * half));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double ang = double(t) * std::pow(double(base), -2.0 * double(i) / double(hd));
        c[size_t(t * half + i)] = float(std::cos(ang));
        s[size_t(t * half + i)] = float(std::sin(ang));
      }
    return *this;
  }
};

// sign = +1: rotate by +angle (forward); -1: by -angle (the transpose, i.e. backward).
void rope_apply(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base, float sign) {
  thread_local RopeTable table;
  const RopeTable& tb = table.get(T, hd, base);
  const int64_t half = hd / 2;
  const float* C = tb.c.data();
  const float* S = tb.s.data();
#pragma omp parallel for schedule(static) if (B * T * NH * hd >= kParallelMin)
  for (int64_t r = 0; r < B * T; ++r) {
    const int64_t t = r % T;
    const float* cr = C + t * half;
    const float* sr = S + t * half;
    for (int64_t h = 0; h < NH; ++h) {
      float* p = x + r * ld + h * hd;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float a = p[2 * i], b = p[2 * i + 1], c = cr[i], s = sign * sr[i];
        p[2 * i] = a * c - b * s;
        p[2 * i + 1] = a * s + b * c;
      }
    }
  }
}
}  // namespace

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    float* yr = y + n * C;
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < C; ++i) ss += xr[i] * xr[i];
    const float r = 1.f / std::sqrt(ss / float(C) + eps);
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) yr[i] = xr[i] * r * w[i];
    rstd[n] = r;
  }
}

// y_i = x_i r w_i with r = (mean(x^2) + eps)^(-1/2): dx_j = r w_j dy_j - x_j r^3 / C * sum_i dy_i w_i x_i.
void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C) {
  // dw is a shared accumulator: rows in sequence (a small fraction of a step, as LayerNorm's backward).
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* dr = dy + n * C;
    const float r = rstd[n];
    float dot = 0.f;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < C; ++i) {
      dot += dr[i] * w[i] * xr[i];
      if (dw) dw[i] += dr[i] * xr[i] * r;
    }
    if (!dx) continue;
    const float k = dot * r * r * r / float(C);
    float* o = dx + n * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) o[i] = r * w[i] * dr[i] - xr[i] * k;
  }
}

void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base) {
  rope_apply(x, B, T, NH, hd, ld, base, 1.f);
}

void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base) {
  rope_apply(dx, B, T, NH, hd, ld, base, -1.f);
}

void swiglu_forward(float* y, const float* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static) if (N * F >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gu + n * 2 * F;
    const float* u = g + F;
    float* yr = y + n * F;
#pragma omp simd
    for (int64_t i = 0; i < F; ++i) yr[i] = g[i] / (1.f + vm::exp(-g[i])) * u[i];
  }
}

// d gate = dy * up * s * (1 + g * (1 - s)), d up = dy * g * s, with s = sigmoid(g).
void swiglu_backward(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static) if (N * F >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* g = gu + n * 2 * F;
    const float* u = g + F;
    const float* d = dy + n * F;
    float* dg = dgu + n * 2 * F;
    float* du = dg + F;
#pragma omp simd
    for (int64_t i = 0; i < F; ++i) {
      const float gi = g[i], ui = u[i], s = 1.f / (1.f + vm::exp(-gi));  // locals: dgu may alias gu
      dg[i] = d[i] * ui * s * (1.f + gi * (1.f - s));
      du[i] = d[i] * gi * s;
    }
  }
}

}  // namespace dd::ops
