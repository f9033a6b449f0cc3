// Fully connected layer: cuBLAS GEMMs plus two small kernels (bias broadcast, bias-gradient column sums).
#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
__global__ void bias_fill_k(float* y, const float* b, int64_t N, int64_t out) {
  const int64_t n = N * out;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = b[i % out];
}
// One thread per output column, looping over rows: adjacent threads read adjacent addresses, and the sum
// order (row 0, 1, ...) is deterministic like the CPU's.
__global__ void col_sum_acc_k(float* db, const float* dy, int64_t N, int64_t out) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < out; o += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int64_t r = 0; r < N; ++r) s += dy[r * out + o];
    db[o] += s;
  }
}
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
  if (db && out > 0) {
    col_sum_acc_k<<<blocks_for(out), kThreads, 0, stream()>>>(db, dy, N, out);
    DD_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace dd::cuops
