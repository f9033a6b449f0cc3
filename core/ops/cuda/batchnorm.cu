// BatchNorm over x[N,C,HW]: one block per channel does that channel's reductions (two-pass mean/variance,
// as the CPU) and its elementwise pass, so no atomics and a deterministic result.
#include <string>

#include "base/error.h"
#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
using detail::block_sum;
constexpr int kBnThreads = 256;

// Element e of channel c (e in [0, N*HW)) lives at (n*C + c)*HW + i.
__device__ __forceinline__ int64_t bn_at(int64_t e, int64_t c, int64_t C, int64_t HW) {
  return ((e / HW) * C + c) * HW + e % HW;
}

__global__ void bn_train_k(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                           const float* x, const float* gamma, const float* beta, int64_t N, int64_t C, int64_t HW,
                           float momentum, float eps) {
  const int64_t c = blockIdx.x, M = N * HW;
  float s = 0.f;
  for (int64_t e = threadIdx.x; e < M; e += blockDim.x) s += x[bn_at(e, c, C, HW)];
  const float mean = float(double(block_sum(s)) / double(M));
  float ss = 0.f;
  for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
    const float d = x[bn_at(e, c, C, HW)] - mean;
    ss += d * d;
  }
  const double var = double(block_sum(ss)) / double(M);
  const float invstd = float(1.0 / sqrt(var + double(eps)));
  const float a = (gamma ? gamma[c] : 1.f) * invstd;
  const float b = (beta ? beta[c] : 0.f) - mean * a;
  for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
    const int64_t at = bn_at(e, c, C, HW);
    y[at] = x[at] * a + b;
  }
  if (threadIdx.x == 0) {
    if (save_mean) save_mean[c] = mean;
    if (save_invstd) save_invstd[c] = invstd;
    if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean;
    if (running_var)
      running_var[c] = (1.f - momentum) * running_var[c] + momentum * float(var * double(M) / double(M - 1));
  }
}

__global__ void bn_eval_k(float* y, const float* x, const float* gamma, const float* beta, const float* rmean,
                          const float* rvar, int64_t N, int64_t C, int64_t HW, float eps) {
  const int64_t n = N * C * HW;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / HW) % C;
    const float a = (gamma ? gamma[c] : 1.f) / sqrtf(rvar[c] + eps);
    const float b = (beta ? beta[c] : 0.f) - rmean[c] * a;
    y[i] = x[i] * a + b;
  }
}

__global__ void bn_bwd_k(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                         const float* save_mean, const float* save_invstd, int64_t N, int64_t C, int64_t HW) {
  const int64_t c = blockIdx.x, M = N * HW;
  const float mean = save_mean[c], invstd = save_invstd[c];
  float a1 = 0.f, a2 = 0.f;  // sum(dy), sum(dy * (x - mean))
  for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
    const int64_t at = bn_at(e, c, C, HW);
    a1 += dy[at];
    a2 += dy[at] * (x[at] - mean);
  }
  const float sdy = block_sum(a1);
  const float sdyx = block_sum(a2) * invstd;
  if (threadIdx.x == 0) {
    if (dbeta) dbeta[c] += sdy;
    if (dgamma) dgamma[c] += sdyx;
  }
  if (!dx) return;
  // dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), folded into dx = dy*k + x*q + r (as the CPU).
  const float k = (gamma ? gamma[c] : 1.f) * invstd;
  const float mdy = sdy / float(M), mdyx = sdyx / float(M);
  const float q = -k * mdyx * invstd;
  const float r = -k * mdy - q * mean;
  for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
    const int64_t at = bn_at(e, c, C, HW);
    dx[at] = dy[at] * k + x[at] * q + r;
  }
}
}  // namespace

void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             const float* x, const float* gamma, const float* beta, int64_t N, int64_t C, int64_t HW,
                             float momentum, float eps) {
  const int64_t M = N * HW;
  if (M < 2)
    throw UsageError("batchnorm training needs more than 1 value per channel (N*HW=" + std::to_string(M) + ")");
  if (C <= 0) return;
  bn_train_k<<<detail::to_int(C, "C"), kBnThreads, 0, stream()>>>(y, save_mean, save_invstd, running_mean, running_var,
                                                                  x, gamma, beta, N, C, HW, momentum, eps);
  DD_CUDA_LAUNCH_CHECK();
}

void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta, const float* running_mean,
                            const float* running_var, int64_t N, int64_t C, int64_t HW, float eps) {
  const int64_t n = N * C * HW;
  if (n <= 0) return;
  bn_eval_k<<<detail::blocks_for(n), detail::kThreads, 0, stream()>>>(y, x, gamma, beta, running_mean, running_var, N,
                                                                      C, HW, eps);
  DD_CUDA_LAUNCH_CHECK();
}

void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                        const float* save_mean, const float* save_invstd, int64_t N, int64_t C, int64_t HW) {
  if (C <= 0 || N * HW <= 0) return;
  bn_bwd_k<<<detail::to_int(C, "C"), kBnThreads, 0, stream()>>>(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd,
                                                                N, C, HW);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
