// Pointwise kernels (ReLU, exact-erf GELU, add, scale, zero): one grid-stride thread per element.
#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

__global__ void relu_fwd_k(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void relu_bwd_k(float* dx, const float* dy, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}
__global__ void gelu_fwd_k(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + erff(v * kInvSqrt2));
  }
}
__global__ void gelu_bwd_k(float* dx, const float* dy, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float cdf = 0.5f * (1.f + erff(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}
__global__ void add_k(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = a[i] + b[i];
}
__global__ void add_inplace_k(float* y, const float* a, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += a[i];
}
__global__ void scale_k(float* x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}
}  // namespace

using detail::blocks_for;
using detail::kThreads;

void relu_forward(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  relu_fwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, n);
  DD_CUDA_LAUNCH_CHECK();
}
void relu_backward(float* dx, const float* dy, const float* y, int64_t n) {
  if (n <= 0) return;
  relu_bwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(dx, dy, y, n);
  DD_CUDA_LAUNCH_CHECK();
}
void gelu_forward(float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  gelu_fwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, n);
  DD_CUDA_LAUNCH_CHECK();
}
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  if (n <= 0) return;
  gelu_bwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(dx, dy, x, n);
  DD_CUDA_LAUNCH_CHECK();
}
void add(float* y, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  add_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, a, b, n);
  DD_CUDA_LAUNCH_CHECK();
}
void add_inplace(float* y, const float* a, int64_t n) {
  if (n <= 0) return;
  add_inplace_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, a, n);
  DD_CUDA_LAUNCH_CHECK();
}
void scale_inplace(float* x, float s, int64_t n) {
  if (n <= 0) return;
  scale_k<<<blocks_for(n), kThreads, 0, stream()>>>(x, s, n);
  DD_CUDA_LAUNCH_CHECK();
}
void fill_zero(float* x, int64_t n) {
  if (n <= 0) return;
  DD_CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * size_t(n), stream()));
}

}  // namespace dd::cuops
