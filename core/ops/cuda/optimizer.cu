// SGD and AdamW update kernels, element for element the formulas of core/optim/optimizer.cpp; both zero the
// gradient afterwards so the next backward can accumulate into it.
#include <cmath>

#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
#define DD_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void sgd_plain_k(float* p, float* g, int64_t n, float lr, float wd) {
  DD_GRID_LOOP(i, n) {
    p[i] -= lr * (g[i] + wd * p[i]);
    g[i] = 0.f;
  }
}
__global__ void sgd_nesterov_k(float* p, float* g, float* buf, int64_t n, float lr, float mu, float wd) {
  DD_GRID_LOOP(i, n) {
    const float d = g[i] + wd * p[i];
    const float b = mu * buf[i] + d;
    buf[i] = b;
    p[i] -= lr * (d + mu * b);
    g[i] = 0.f;
  }
}
__global__ void sgd_momentum_k(float* p, float* g, float* buf, int64_t n, float lr, float mu, float wd) {
  DD_GRID_LOOP(i, n) {
    const float b = mu * buf[i] + (g[i] + wd * p[i]);
    buf[i] = b;
    p[i] -= lr * b;
    g[i] = 0.f;
  }
}
__global__ void adamw_k(float* p, float* g, float* m, float* v, int64_t n, float b1, float b2, float eps, float step,
                        float inv_sqrt_bc2, float decay) {
  DD_GRID_LOOP(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    g[i] = 0.f;
  }
}
#undef DD_GRID_LOOP
}  // namespace

using detail::blocks_for;
using detail::kThreads;

void sgd_update(float* p, float* g, float* mom, int64_t n, float lr, float momentum, bool nesterov, float wd) {
  if (n <= 0) return;
  if (momentum == 0.0f)
    sgd_plain_k<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, n, lr, wd);
  else if (nesterov)
    sgd_nesterov_k<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, mom, n, lr, momentum, wd);
  else
    sgd_momentum_k<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, mom, n, lr, momentum, wd);
  DD_CUDA_LAUNCH_CHECK();
}

void adamw_update(float* p, float* g, float* m, float* v, int64_t n, float lr, float b1, float b2, float eps, float wd,
                  int64_t step) {
  if (n <= 0) return;
  if (step < 1)
    throw std::runtime_error("dd::cuops::adamw_update: step must be >= 1 (got " + std::to_string(step) + ")");
  // Bias corrections on the host in double, exactly as the CPU optimizer computes them.
  const double t = double(step);
  const float bc1 = float(1.0 - std::pow(double(b1), t)), bc2 = float(1.0 - std::pow(double(b2), t));
  const float stp = lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2), decay = 1.0f - lr * wd;
  adamw_k<<<blocks_for(n), kThreads, 0, stream()>>>(p, g, m, v, n, b1, b2, eps, stp, inv_sqrt_bc2, decay);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
