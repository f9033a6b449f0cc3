// Internal to dd_ops_cuda: deterministic column sums of an N x C row-major expression, out[c] += sum_n f(n, c)
// (one or two outputs per column), for the parameter gradients of Linear biases, LayerNorm and RMSNorm.
//
// One thread per column would leave a GPU idle (C threads, each looping over all N rows: 3.9 ms for a 256-column
// LayerNorm over 8192 rows on an H200). Here stage 1 gives each block 32 columns x one chunk of rows (8 thread
// rows striding through it, adjacent threads on adjacent columns), reduces them in shared memory in a fixed order
// and writes one partial per chunk to the thread's scratch; stage 2 adds the chunks' partials in chunk order.
// The order of every addition is fixed by N and C alone, so results do not depend on scheduling.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "core/ops/cuda/context.h"

namespace dd::cuops::detail {

constexpr int kColTile = 32;          // columns per block (one warp's worth of adjacent addresses)
constexpr int kColRowThreads = 8;     // thread rows per block
constexpr int64_t kColChunkRows = 256;  // rows per chunk (grown so that chunks fit gridDim.y)

template <typename F>
__global__ void col_partial_k(float* part, int64_t N, int64_t C, int64_t chunk, F f) {
  __shared__ float sh[2][kColRowThreads][kColTile];
  const int64_t c = blockIdx.x * int64_t(kColTile) + threadIdx.x;
  const int64_t n0 = blockIdx.y * chunk, n1 = n0 + chunk < N ? n0 + chunk : N;
  float a = 0.f, b = 0.f;
  if (c < C)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += kColRowThreads) {
      const float2 v = f(n, c);
      a += v.x;
      b += v.y;
    }
  sh[0][threadIdx.y][threadIdx.x] = a;
  sh[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y < 2 && c < C) {  // thread row k sums output k over the thread rows, in order
    float s = 0.f;
    for (int r = 0; r < kColRowThreads; ++r) s += sh[threadIdx.y][r][threadIdx.x];
    part[(int64_t(threadIdx.y) * gridDim.y + blockIdx.y) * C + c] = s;
  }
}

// A template so that every kernel file may include this header (one instantiation, like col_partial_k's).
template <int kUnused = 0>
__global__ void col_final_k(float* out0, float* out1, const float* part, int64_t chunks, int64_t C) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C; c += int64_t(gridDim.x) * blockDim.x) {
    float a = 0.f, b = 0.f;
    for (int64_t j = 0; j < chunks; ++j) {
      a += part[j * C + c];
      b += part[(chunks + j) * C + c];
    }
    if (out0) out0[c] += a;
    if (out1) out1[c] += b;
  }
}

// out0[c] += sum_n f(n, c).x and out1[c] += sum_n f(n, c).y (either may be null), on the compute stream.
template <typename F>
void column_sums(float* out0, float* out1, int64_t N, int64_t C, F f) {
  if (N <= 0 || C <= 0 || (!out0 && !out1)) return;
  const int64_t chunk = std::max(kColChunkRows, (N + 65534) / 65535);
  const int64_t chunks = (N + chunk - 1) / chunk;
  float* part = scratch(size_t(2 * chunks * C));
  const dim3 grid(unsigned((C + kColTile - 1) / kColTile), unsigned(chunks)), block(kColTile, kColRowThreads);
  col_partial_k<<<grid, block, 0, stream()>>>(part, N, C, chunk, f);
  DD_CUDA_LAUNCH_CHECK();
  col_final_k<><<<blocks_for(C), kThreads, 0, stream()>>>(out0, out1, part, chunks, C);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops::detail
