// 2x2/stride-2 max pooling (argmax 0..3 saved, first maximum wins ties), k x k / stride / padding max pooling
// (flat argmax, the backward a gather per input) and global average pooling; one thread per output (or per input
// for the scatters).
#include <math_constants.h>

#include <string>

#include "base/error.h"
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
// One thread per output: the window clipped to the input, strict > (first maximum wins) or NaN.
__global__ void maxpool_fwd_k(float* y, int32_t* idx, const float* x, int64_t planes, int64_t H, int64_t W,
                              int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  DD_GRID_LOOP(o, planes * Ho * Wo) {
    const int64_t q = o / (Ho * Wo), r = o % (Ho * Wo), oh = r / Wo, ow = r % Wo;
    const int64_t h0 = max(oh * s - p, int64_t(0)), h1 = min(oh * s - p + k, H);
    const int64_t w0 = max(ow * s - p, int64_t(0)), w1 = min(ow * s - p + k, W);
    const float* xp = x + q * H * W;
    int64_t best = h0 * W + w0;
    float m = -CUDART_INF_F;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const float v = xp[h * W + w];
        if (v > m || isnan(v)) m = v, best = h * W + w;
      }
    y[o] = m;
    idx[o] = int32_t(best);
  }
}
// One thread per input: sums dy over the (at most ceil(k/s)^2) windows that contain it and chose it, in
// output order, so the result does not depend on scheduling.
__global__ void maxpool_bwd_k(float* dx, const float* dy, const int32_t* idx, int64_t planes, int64_t H, int64_t W,
                              int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  DD_GRID_LOOP(i, planes * H * W) {
    const int64_t q = i / (H * W), r = i % (H * W), h = r / W, w = r % W;
    // Windows oh with oh*s - p <= h < oh*s - p + k.
    const int64_t oh0 = h + p - k + 1 > 0 ? (h + p - k + 1 + s - 1) / s : 0, oh1 = min((h + p) / s, Ho - 1);
    const int64_t ow0 = w + p - k + 1 > 0 ? (w + p - k + 1 + s - 1) / s : 0, ow1 = min((w + p) / s, Wo - 1);
    const int64_t base = q * Ho * Wo;
    float acc = 0.f;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow)
        if (idx[base + oh * Wo + ow] == r) acc += dy[base + oh * Wo + ow];
    dx[i] = acc;
  }
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

namespace dd::cuops {

namespace {
void check_maxpool(int64_t H, int64_t W, int64_t k, int64_t s, int64_t p) {
  const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
  if (k < 1 || s < 1 || p < 0 || 2 * p > k || Ho < 1 || Wo < 1)
    throw UsageError("maxpool: need k >= 1, stride >= 1, 0 <= pad <= k/2 and an input of at least one window (got "
                     "k=" + std::to_string(k) + " stride=" + std::to_string(s) + " pad=" + std::to_string(p) +
                     " on " + std::to_string(H) + "x" + std::to_string(W) + ")");
}
}  // namespace

void maxpool_forward(float* y, int32_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k,
                     int64_t s, int64_t p) {
  check_maxpool(H, W, k, s, p);
  const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1, n = N * C * Ho * Wo;
  if (n <= 0) return;
  maxpool_fwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(y, idx, x, N * C, H, W, Ho, Wo, k, s, p);
  DD_CUDA_LAUNCH_CHECK();
}

void maxpool_backward(float* dx, const float* dy, const int32_t* idx, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t k, int64_t s, int64_t p) {
  check_maxpool(H, W, k, s, p);
  const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1, n = N * C * H * W;
  if (n <= 0) return;
  maxpool_bwd_k<<<blocks_for(n), kThreads, 0, stream()>>>(dx, dy, idx, N * C, H, W, Ho, Wo, k, s, p);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
