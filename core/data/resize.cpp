// resize_bilinear: per-axis source indices and weights computed once, then a pass along x and one along y.
#include "core/data/resize.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace dd::data {
namespace {

// For each output coordinate along one axis: the two input coordinates and their weights.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

Taps axis_taps(int64_t in, int64_t out) {
  Taps t;
  t.i0.resize(size_t(out));
  t.i1.resize(size_t(out));
  t.w0.resize(size_t(out));
  t.w1.resize(size_t(out));
  const float scale = float(in) / float(out);
  for (int64_t o = 0; o < out; ++o) {
    float s = scale * (float(o) + 0.5f) - 0.5f;
    if (s < 0) s = 0;
    int64_t i = int64_t(s);  // s >= 0: truncation is floor
    if (i > in - 1) i = in - 1;
    const float frac = s - float(i);
    t.i0[size_t(o)] = i;
    t.i1[size_t(o)] = i < in - 1 ? i + 1 : i;
    t.w1[size_t(o)] = frac;
    t.w0[size_t(o)] = 1.0f - frac;
  }
  return t;
}

}  // namespace

void resize_bilinear(const float* src, int64_t n, int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow) {
  DD_CHECK(n >= 0 && h >= 1 && w >= 1 && oh >= 1 && ow >= 1,
           "resize_bilinear: bad sizes " + std::to_string(h) + "x" + std::to_string(w) + " -> " +
               std::to_string(oh) + "x" + std::to_string(ow));
  const Taps ty = axis_taps(h, oh), tx = axis_taps(w, ow);
  // Separable, with the grouping of the documented formula: each input row is first blended along x
  // (rows[y][j] = b0 in(y, x0) + b1 in(y, x1)), then each output row blends two of those along y
  // (a0 rows[y0][j] + a1 rows[y1][j]), a contiguous loop the compiler vectorizes.
  std::vector<float> rows(size_t(h * ow));
  for (int64_t p = 0; p < n; ++p) {
    const float* in = src + p * h * w;
    float* out = dst + p * oh * ow;
    for (int64_t y = 0; y < h; ++y) {
      const float* r = in + y * w;
      float* hr = rows.data() + y * ow;
      for (int64_t j = 0; j < ow; ++j)
        hr[j] = tx.w0[size_t(j)] * r[tx.i0[size_t(j)]] + tx.w1[size_t(j)] * r[tx.i1[size_t(j)]];
    }
    for (int64_t i = 0; i < oh; ++i) {
      const float* r0 = rows.data() + ty.i0[size_t(i)] * ow;
      const float* r1 = rows.data() + ty.i1[size_t(i)] * ow;
      const float a0 = ty.w0[size_t(i)], a1 = ty.w1[size_t(i)];
      float* o = out + i * ow;
      for (int64_t j = 0; j < ow; ++j) o[j] = a0 * r0[j] + a1 * r1[j];
    }
  }
}

}  // namespace dd::data
