// Fully connected layer: cuBLAS GEMMs, a bias-broadcast kernel and the bias gradient's column sums.
#include "core/ops/cuda/col_reduce.cuh"
#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
__global__ void bias_fill_k(float* y, const float* b, int64_t N, int64_t out) {
  const int64_t n = N * out;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = b[i % out];
}
// Row n, column o of dy (the bias gradient sums over rows).
struct BiasGrad {
  const float* dy;
  int64_t out;
  __device__ float2 operator()(int64_t n, int64_t o) const { return make_float2(dy[n * out + o], 0.f); }
};
}  // namespace

using detail::blocks_for;
using detail::kThreads;

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out) {
  if (b && N * out > 0) {
    // Pre-fill rows with the bias so the GEMM accumulates into it (beta = 1).
    bias_fill_k<<<blocks_for(N * out), kThreads, 0, stream()>>>(y, b, N, out);
    DD_CUDA_LAUNCH_CHECK();
  }
  gemm(false, true, N, out, in, 1.f, x, in, W, in, b ? 1.f : 0.f, y, out);
}

void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                     int64_t in, int64_t out) {
  if (dx) gemm(false, false, N, in, out, 1.f, dy, out, W, in, 0.f, dx, in);
  if (dW) gemm(true, false, out, in, N, 1.f, dy, out, x, in, 1.f, dW, in);
  if (db) detail::column_sums(db, nullptr, N, out, BiasGrad{dy, out});
}

}  // namespace dd::cuops
