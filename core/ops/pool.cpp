// 2x2/stride-2 max pooling (argmax saved as 0..3) and global average pooling over NCHW planes.
#include <cstring>

#include "core/ops/ops.h"

namespace dd::ops {

void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2, planes = N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= (1 << 16))
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * H * W;
    float* yp = y + p * Ho * Wo;
    uint8_t* ip = idx + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const float* r0 = xp + (2 * oh) * W;
      const float* r1 = r0 + W;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        // Branch-free selects (random data defeats branch prediction); first maximum wins on ties, as PyTorch.
        const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        const bool hb = b > a, hd = d > c;
        const float m0 = hb ? b : a, m1 = hd ? d : c;
        const int k0 = hb ? 1 : 0, k1 = hd ? 3 : 2;
        const bool lo = m1 > m0;
        const float m = lo ? m1 : m0;
        const uint8_t k = static_cast<uint8_t>(lo ? k1 : k0);
        yp[oh * Wo + ow] = m;
        ip[oh * Wo + ow] = k;
      }
    }
  }
}

void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2, planes = N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= (1 << 16))
  for (int64_t p = 0; p < planes; ++p) {
    float* xp = dx + p * H * W;
    const float* dp = dy + p * Ho * Wo;
    const uint8_t* ip = idx + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      float* r0 = xp + (2 * oh) * W;
      float* r1 = r0 + W;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const float g = dp[oh * Wo + ow];
        const uint8_t k = ip[oh * Wo + ow];
        r0[2 * ow] = k == 0 ? g : 0.f;
        r0[2 * ow + 1] = k == 1 ? g : 0.f;
        r1[2 * ow] = k == 2 ? g : 0.f;
        r1[2 * ow + 1] = k == 3 ? g : 0.f;
      }
      if (W & 1) r0[W - 1] = r1[W - 1] = 0.f;  // odd width: last column never pooled
    }
    if (H & 1) std::memset(xp + (H - 1) * W, 0, sizeof(float) * W);  // odd height: last row never pooled
  }
}

void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW) {
  const float inv = 1.f / static_cast<float>(HW);
  for (int64_t p = 0; p < N * C; ++p) {
    const float* xp = x + p * HW;
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < HW; ++i) acc += xp[i];
    y[p] = acc * inv;
  }
}

void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW) {
  const float inv = 1.f / static_cast<float>(HW);
  for (int64_t p = 0; p < N * C; ++p) {
    const float g = dy[p] * inv;
    float* xp = dx + p * HW;
#pragma omp simd
    for (int64_t i = 0; i < HW; ++i) xp[i] = g;
  }
}

}  // namespace dd::ops
