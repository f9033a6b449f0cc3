// 2x2/stride-2 max pooling (argmax saved as 0..3), k x k / stride / padding max pooling (flat argmax) and
// global average pooling over NCHW planes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

namespace {
// Stage 1: vertical max of a row pair (contiguous). k records which row won (0 top, 2 bottom).
void pool_vertical(float* __restrict m, uint8_t* __restrict k, const float* __restrict r0,
                   const float* __restrict r1, int64_t n) {
  for (int64_t w = 0; w < n; ++w) {
    const bool lo = r1[w] > r0[w];  // strict: the top row wins ties
    m[w] = lo ? r1[w] : r0[w];
    k[w] = lo ? 2 : 0;
  }
}

// Stage 2: stride-2 horizontal pick over a whole plane at once, so the scalar loop remainder (which GCC
// compiles with data-dependent branches) runs once per plane instead of once per row.
void pool_horizontal(float* __restrict y, uint8_t* __restrict ip, const float* __restrict m,
                     const uint8_t* __restrict k, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    // Window order 0 1 / 2 3; the first maximum wins on ties, as in PyTorch. Bitwise ops keep it branch-free.
    const float a = m[2 * j], b = m[2 * j + 1];
    const uint8_t ka = k[2 * j], kb = static_cast<uint8_t>(k[2 * j + 1] + 1);
    const bool right = (b > a) | ((b == a) & (kb < ka));
    y[j] = right ? b : a;
    ip[j] = right ? kb : ka;
  }
}
}  // namespace

void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2, planes = N * C;
#pragma omp parallel if (planes * H * W >= (1 << 16))
  {
    std::vector<float> vm(static_cast<size_t>(Ho * 2 * Wo));  // per-thread plane of vertical maxima
    std::vector<uint8_t> vk(vm.size());
#pragma omp for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const float* r0 = x + p * H * W + (2 * oh) * W;
        pool_vertical(vm.data() + oh * 2 * Wo, vk.data() + oh * 2 * Wo, r0, r0 + W, 2 * Wo);
      }
      pool_horizontal(y + p * Ho * Wo, idx + p * Ho * Wo, vm.data(), vk.data(), Ho * Wo);
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
    // Zero the plane (also covers the unpooled last row/column of odd sizes), then scatter without branches.
    std::memset(xp, 0, sizeof(float) * H * W);
    for (int64_t oh = 0; oh < Ho; ++oh) {
      float* r0 = xp + (2 * oh) * W;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int k = ip[oh * Wo + ow];
        r0[(k >> 1) * W + 2 * ow + (k & 1)] = dp[oh * Wo + ow];
      }
    }
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

// ---- k x k / stride s / padding p max pool (ResNet stem) ----
namespace dd::ops {

namespace {
void check_maxpool(int64_t H, int64_t W, int64_t k, int64_t s, int64_t p) {
  if (k < 1 || s < 1 || p < 0 || 2 * p > k)
    throw UsageError("maxpool: need k >= 1, stride >= 1 and 0 <= pad <= k/2 (got k=" + std::to_string(k) +
                     " stride=" + std::to_string(s) + " pad=" + std::to_string(p) + ")");
  if (maxpool_out(H, k, s, p) < 1 || maxpool_out(W, k, s, p) < 1)
    throw UsageError("maxpool: input " + std::to_string(H) + "x" + std::to_string(W) + " too small for k=" +
                     std::to_string(k) + " pad=" + std::to_string(p));
}
}  // namespace

void maxpool_forward(float* y, int32_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k,
                     int64_t s, int64_t p) {
  check_maxpool(H, W, k, s, p);
  const int64_t Ho = maxpool_out(H, k, s, p), Wo = maxpool_out(W, k, s, p), planes = N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= (1 << 16))
  for (int64_t q = 0; q < planes; ++q) {
    const float* xp = x + q * H * W;
    float* yp = y + q * Ho * Wo;
    int32_t* ip = idx + q * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * s - p, 0), h1 = std::min(oh * s - p + k, H);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * s - p, 0), w1 = std::min(ow * s - p + k, W);
        // p <= k/2 keeps every window at least one input element wide.
        int64_t best = h0 * W + w0;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            const float v = xp[h * W + w];
            if (v > m || std::isnan(v)) m = v, best = h * W + w;
          }
        yp[oh * Wo + ow] = m;
        ip[oh * Wo + ow] = int32_t(best);
      }
    }
  }
}

void maxpool_backward(float* dx, const float* dy, const int32_t* idx, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t k, int64_t s, int64_t p) {
  check_maxpool(H, W, k, s, p);
  const int64_t no = maxpool_out(H, k, s, p) * maxpool_out(W, k, s, p), planes = N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= (1 << 16))
  for (int64_t q = 0; q < planes; ++q) {
    float* xp = dx + q * H * W;
    const float* dp = dy + q * no;
    const int32_t* ip = idx + q * no;
    std::memset(xp, 0, sizeof(float) * size_t(H * W));
    // Overlapping windows (s < k) may share an argmax: accumulate, in output order (deterministic).
    for (int64_t o = 0; o < no; ++o) xp[ip[o]] += dp[o];
  }
}

}  // namespace dd::ops
