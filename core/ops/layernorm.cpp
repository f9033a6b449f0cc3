// LayerNorm over the last dim (llm.c formulation): rows independent in forward; backward accumulates dw/db.
#include <cmath>

#include "core/ops/ops.h"

namespace dd::ops {

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C >= (1 << 16))
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    float* yr = y + n * C;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < C; ++i) s += xr[i];
    const float m = s / C;
    float v = 0.f;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < C; ++i) {
      float d = xr[i] - m;
      v += d * d;
    }
    const float r = 1.f / std::sqrt(v / C + eps);
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) * r * w[i] + b[i];
    mean[n] = m;
    rstd[n] = r;
  }
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C) {
  // Sequential over rows: dw/db are shared accumulators and the whole op is a small fraction of a step.
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* dr = dy + n * C;
    const float m = mean[n], r = rstd[n];
    float sdn = 0.f, sdnx = 0.f;  // sum(w*dy), sum(w*dy*xhat)
#pragma omp simd reduction(+ : sdn, sdnx)
    for (int64_t i = 0; i < C; ++i) {
      const float xh = (xr[i] - m) * r;
      const float dn = w[i] * dr[i];
      sdn += dn;
      sdnx += dn * xh;
      if (dw) dw[i] += dr[i] * xh;
      if (db) db[i] += dr[i];
    }
    if (!dx) continue;
    const float a = sdn / C, bq = sdnx / C;
    float* o = dx + n * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) {
      const float xh = (xr[i] - m) * r;
      o[i] = (w[i] * dr[i] - a - xh * bq) * r;
    }
  }
}

}  // namespace dd::ops
