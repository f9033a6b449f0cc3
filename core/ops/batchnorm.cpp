// BatchNorm over x[N,C,HW], hand-written: per channel the HW rows are contiguous, so inner loops vectorize.
// Channels are independent, so they are split across threads.
#include <cmath>
#include <string>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

namespace {
// Parallelize over channels only when there is enough work to amortize the parallel region.
bool bn_parallel(int64_t N, int64_t C, int64_t HW) { return C > 1 && N * C * HW >= (1 << 15); }
}  // namespace

void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, const float* x, const float* gamma, const float* beta, int64_t N,
                             int64_t C, int64_t HW, float momentum, float eps) {
  const int64_t M = N * HW;
  if (M < 2)
    throw UsageError("batchnorm training needs more than 1 value per channel (N*HW=" + std::to_string(M) + ")");
#pragma omp parallel for schedule(static) if (bn_parallel(N, C, HW))
  for (int64_t c = 0; c < C; ++c) {
    // Two passes (mean, then centered squares) for accuracy; float lanes per row, double across rows.
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      float acc = 0.f;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < HW; ++i) acc += xr[i];
      s += acc;
    }
    const float mean = static_cast<float>(s / M);
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      float acc = 0.f;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < HW; ++i) {
        float d = xr[i] - mean;
        acc += d * d;
      }
      ss += acc;
    }
    const double var = ss / M;
    const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float g = gamma ? gamma[c] : 1.f;
    const float a = g * invstd;
    const float b = (beta ? beta[c] : 0.f) - mean * a;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      float* yr = y + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) yr[i] = xr[i] * a + b;
    }
    if (save_mean) save_mean[c] = mean;
    if (save_invstd) save_invstd[c] = invstd;
    if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean;
    if (running_var)
      running_var[c] = (1.f - momentum) * running_var[c] + momentum * static_cast<float>(var * M / (M - 1));
  }
}

void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, int64_t N, int64_t C, int64_t HW,
                            float eps) {
#pragma omp parallel for schedule(static) if (bn_parallel(N, C, HW))
  for (int64_t c = 0; c < C; ++c) {
    const float a = (gamma ? gamma[c] : 1.f) / std::sqrt(running_var[c] + eps);
    const float b = (beta ? beta[c] : 0.f) - running_mean[c] * a;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      float* yr = y + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) yr[i] = xr[i] * a + b;
    }
  }
}

void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* save_mean, const float* save_invstd, int64_t N, int64_t C,
                        int64_t HW) {
  const int64_t M = N * HW;
#pragma omp parallel for schedule(static) if (bn_parallel(N, C, HW))
  for (int64_t c = 0; c < C; ++c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    double sdy = 0, sdyx = 0;  // sum(dy), sum(dy * xhat)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      const float* dr = dy + (n * C + c) * HW;
      float a1 = 0.f, a2 = 0.f;
#pragma omp simd reduction(+ : a1, a2)
      for (int64_t i = 0; i < HW; ++i) {
        a1 += dr[i];
        a2 += dr[i] * (xr[i] - mean);
      }
      sdy += a1;
      sdyx += a2;
    }
    sdyx *= invstd;
    if (dbeta) dbeta[c] += static_cast<float>(sdy);
    if (dgamma) dgamma[c] += static_cast<float>(sdyx);
    if (!dx) continue;
    // dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), folded into dx = dy*k + x*q + r.
    const float k = (gamma ? gamma[c] : 1.f) * invstd;
    const float mdy = static_cast<float>(sdy / M), mdyx = static_cast<float>(sdyx / M);
    const float q = -k * mdyx * invstd;
    const float r = -k * mdy - q * mean;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + (n * C + c) * HW;
      const float* dr = dy + (n * C + c) * HW;
      float* o = dx + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) o[i] = dr[i] * k + xr[i] * q + r;
    }
  }
}

}  // namespace dd::ops
