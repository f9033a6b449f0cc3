// Embedding row gather and its scatter-add backward (atomicAdd: repeated tokens hit the same row).
#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
__global__ void emb_fwd_k(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < N * C; e += int64_t(gridDim.x) * blockDim.x)
    y[e] = W[int64_t(idx[e / C]) * C + e % C];
}
__global__ void emb_bwd_k(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < N * C; e += int64_t(gridDim.x) * blockDim.x)
    atomicAdd(dW + int64_t(idx[e / C]) * C + e % C, dy[e]);
}
}  // namespace

void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) {
  if (N * C <= 0) return;
  emb_fwd_k<<<detail::blocks_for(N * C), detail::kThreads, 0, stream()>>>(y, idx, W, N, C);
  DD_CUDA_LAUNCH_CHECK();
}

void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) {
  if (N * C <= 0) return;
  emb_bwd_k<<<detail::blocks_for(N * C), detail::kThreads, 0, stream()>>>(dW, dy, idx, N, C);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
