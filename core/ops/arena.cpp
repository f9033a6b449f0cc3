// Arena kernels on the host (ops.h): the loops the sync engine, the sensitivity probe and the anomaly guard ran
// inline before they went through the kernel table, with the same arithmetic in the same order.
#include <cstdint>

#include "core/ops/ops.h"

namespace dd::ops {

void dot3(const float* a, const float* b, int64_t n, double* out) {
  double aa = 0, bb = 0, ab = 0;
  for (int64_t i = 0; i < n; ++i) {
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
    ab += double(a[i]) * b[i];
  }
  out[0] = aa, out[1] = bb, out[2] = ab;
}

void sub(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i];
}

void add_diff(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a[i] - b[i];
}

void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = anchor[i] - avg[i];
    mom[i] = mu * mom[i] + g;
    anchor[i] -= lr * (g + mu * mom[i]);
  }
}

}  // namespace dd::ops
