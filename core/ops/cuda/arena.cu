// Arena kernels (ops_cuda.h): dot3 and all_finite as deterministic two-stage reductions whose result alone is
// copied to the host (the only synchronizations), sub / add_diff / outer_nesterov as grid-stride pointwise loops
// with the host's float arithmetic (core/ops/arena.cpp).
#include <algorithm>

#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
// dot3's grid: one block per kThreads elements, at most kDotBlocks. A function of n alone, so the order of every
// addition (per-thread grid-stride sums, the block tree, then the partials in block order) is the same on every
// call with the same n: repeated calls give bitwise the same sums.
constexpr int64_t kDotBlocks = 1024;

__global__ void dot3_partial_k(double* part, const float* a, const float* b, int64_t n) {
  double aa = 0, bb = 0, ab = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double x = a[i], y = b[i];
    aa += x * x;  // float * float is exact in double, so contraction into an FMA changes nothing
    bb += y * y;
    ab += x * y;
  }
  aa = detail::block_sum(aa);
  bb = detail::block_sum(bb);
  ab = detail::block_sum(ab);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = aa;
    part[gridDim.x + blockIdx.x] = bb;
    part[2 * gridDim.x + blockIdx.x] = ab;
  }
}

// One block: each thread adds the partials j = tid, tid + blockDim, ... in order, then the block tree.
__global__ void dot3_final_k(double* res, const double* part, int64_t blocks) {
  double s[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k)
    for (int64_t j = threadIdx.x; j < blocks; j += blockDim.x) s[k] += part[k * blocks + j];
  for (int k = 0; k < 3; ++k) {
    const double t = detail::block_sum(s[k]);
    if (threadIdx.x == 0) res[k] = t;
  }
}

// flag |= 1 when any x[i] has all exponent bits set (Inf or NaN), as dd::ops::all_finite.
__global__ void nonfinite_k(unsigned* flag, const float* x, int64_t n) {
  constexpr unsigned kExp = 0x7f800000u;
  int bad = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    bad |= (__float_as_uint(x[i]) & kExp) == kExp;
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(flag, 1u);
}

__global__ void sub_k(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = a[i] - b[i];
}
__global__ void add_diff_k(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += a[i] - b[i];
}
// The host's loop as its compiler emits it (-march=x86-64-v3, GCC's default -ffp-contract=fast): both
// multiply-adds, and anchor - lr * t, are fused multiply-adds with one rounding each.
__global__ void outer_nesterov_k(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = anchor[i];
    const float g = a - avg[i];
    const float m = __fmaf_rn(mu, mom[i], g);  // mom = mu * mom + g
    mom[i] = m;
    anchor[i] = __fmaf_rn(-lr, __fmaf_rn(mu, m, g), a);  // anchor -= lr * (g + mu * mom)
  }
}
}  // namespace

using detail::blocks_for;
using detail::kThreads;

bool all_finite(const float* x, int64_t n) {
  if (n <= 0) return true;
  auto* flag = reinterpret_cast<unsigned*>(detail::scratch(1));
  DD_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(unsigned), stream()));
  nonfinite_k<<<blocks_for(n), kThreads, 0, stream()>>>(flag, x, n);
  DD_CUDA_LAUNCH_CHECK();
  unsigned h = 0;
  DD_CUDA_CHECK(cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, stream()));
  DD_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return h == 0;
}

void dot3(const float* a, const float* b, int64_t n, double* out) {
  if (n <= 0) {
    out[0] = out[1] = out[2] = 0;
    return;
  }
  const int64_t blocks = std::min<int64_t>(kDotBlocks, (n + kThreads - 1) / kThreads);
  // 3 partials per block, then the 3 sums: doubles in the thread's grown-only scratch (256-byte aligned).
  auto* part = reinterpret_cast<double*>(detail::scratch(size_t(2 * (3 * blocks + 3))));
  double* res = part + 3 * blocks;
  dot3_partial_k<<<unsigned(blocks), kThreads, 0, stream()>>>(part, a, b, n);
  DD_CUDA_LAUNCH_CHECK();
  dot3_final_k<<<1, kThreads, 0, stream()>>>(res, part, blocks);
  DD_CUDA_LAUNCH_CHECK();
  DD_CUDA_CHECK(cudaMemcpyAsync(out, res, 3 * sizeof(double), cudaMemcpyDeviceToHost, stream()));
  DD_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void sub(float* y, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  sub_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, a, b, n);
  DD_CUDA_LAUNCH_CHECK();
}

void add_diff(float* y, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  add_diff_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, a, b, n);
  DD_CUDA_LAUNCH_CHECK();
}

void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) {
  if (n <= 0) return;
  outer_nesterov_k<<<blocks_for(n), kThreads, 0, stream()>>>(anchor, mom, avg, n, lr, mu);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
