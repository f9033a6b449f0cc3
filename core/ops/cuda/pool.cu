// 2x2/stride-2 max pooling (argmax 0..3 saved, first maximum wins ties) and global average pooling; one thread
// per output (or per input for the scatters, whose windows never overlap).
#include "core/ops/cuda/context.h"

namespace dd::cuops {

namespace {
#define DD_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void maxpool2_fwd_k(float* y, uint8_t* idx, const float* x, int64_t planes, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  DD_GRID_LOOP(o, planes * Ho * Wo) {
    const int64_t p = o / (Ho * Wo), r = o % (Ho * Wo), oh = r / Wo, ow = r % Wo;
    const float* w0 = x + p * H * W + (2 * oh) * W + 2 * ow;
    const float v[4] = {w0[0], w0[1], w0[W], w0[W + 1]};
    float best = v[0];
    uint8_t k = 0;
    for (uint8_t j = 1; j < 4; ++j)
      if (v[j] > best) best = v[j], k = j;  // strict: the earliest window position wins ties
    y[o] = best;
    idx[o] = k;
  }
}
__global__ void maxpool2_bwd_k(float* dx, const float* dy, const uint8_t* idx, int64_t planes, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  DD_GRID_LOOP(o, planes * Ho * Wo) {
    const int64_t p = o / (Ho * Wo), r = o % (Ho * Wo), oh = r / Wo, ow = r % Wo;
    const int k = idx[o];
    dx[p * H * W + (2 * oh + (k >> 1)) * W + 2 * ow + (k & 1)] = dy[o];
  }
}
__global__ void avgpool_fwd_k(float* y, const float* x, int64_t planes, int64_t HW) {
  const float inv = 1.f / float(HW);
  DD_GRID_LOOP(p, planes) {
    const float* xp = x + p * HW;
    float acc = 0.f;
    for (int64_t i = 0; i < HW; ++i) acc += xp[i];
    y[p] = acc * inv;
  }
}
__global__ void avgpool_bwd_k(float* dx, const float* dy, int64_t planes, int64_t HW) {
  const float inv = 1.f / float(HW);
  DD_GRID_LOOP(i, planes * HW) dx[i] = dy[i / HW] * inv;
}
#undef DD_GRID_LOOP
}  // namespace

using detail::blocks_for;
using detail::kThreads;

void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t n = N * C * (H / 2) * (W / 2);
  if (n <= 0) return;
  maxpool2_fwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, idx, x, N * C, H, W);
  DD_CUDA_LAUNCH_CHECK();
}

void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H, int64_t W) {
  if (N * C * H * W <= 0) return;
  // Zero first: non-argmax positions and the unpooled last row/column of odd sizes get no scatter.
  fill_zero(dx, N * C * H * W);
  const int64_t n = N * C * (H / 2) * (W / 2);
  if (n <= 0) return;
  maxpool2_bwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(dx, dy, idx, N * C, H, W);
  DD_CUDA_LAUNCH_CHECK();
}

void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW) {
  if (N * C <= 0) return;
  avgpool_fwd_k<<<blocks_for(N * C), kThreads, 0, stream()>>>(y, x, N * C, HW);
  DD_CUDA_LAUNCH_CHECK();
}

void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW) {
  if (N * C * HW <= 0) return;
  avgpool_bwd_k<<<blocks_for(N * C * HW), kThreads, 0, stream()>>>(dx, dy, N * C, HW);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
