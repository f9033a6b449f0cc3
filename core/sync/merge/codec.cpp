// Payload codecs of compressed layer sync (see codec.h).
#include "core/sync/merge/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "base/bf16.h"

namespace dd::sync {
namespace {

size_t blocks(size_t n) { return (n + kInt8Block - 1) / kInt8Block; }

}  // namespace

size_t encoded_bytes(Codec c, size_t n) {
  switch (c) {
    case Codec::Bf16: return 2 * n;
    case Codec::Int8: return n + 4 * blocks(n);
    case Codec::None: break;
  }
  throw std::invalid_argument("encoded_bytes: no codec");
}

void encode(Codec c, const float* x, size_t n, uint8_t* out) {
  if (c == Codec::Bf16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = bf16_bits(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    return;
  }
  if (c != Codec::Int8) throw std::invalid_argument("encode: no codec");
  const size_t nb = blocks(n);
  auto* codes = reinterpret_cast<int8_t*>(out + 4 * nb);
  for (size_t b = 0; b < nb; ++b) {
    const size_t lo = b * kInt8Block, hi = std::min(n, lo + kInt8Block);
    float m = 0;
    bool finite = true;
    for (size_t i = lo; i < hi; ++i) {
      finite &= std::isfinite(x[i]);
      m = std::max(m, std::fabs(x[i]));
    }
    const float scale = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
    std::memcpy(out + 4 * b, &scale, 4);
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (size_t i = lo; i < hi; ++i) {
      const float q = finite ? std::nearbyint(x[i] * inv) : 0.0f;
      codes[i] = int8_t(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

void decode(Codec c, const uint8_t* in, size_t n, float* out) {
  if (c == Codec::Bf16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      out[i] = bf16_value(h);
    }
    return;
  }
  if (c != Codec::Int8) throw std::invalid_argument("decode: no codec");
  const size_t nb = blocks(n);
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * nb);
  for (size_t b = 0; b < nb; ++b) {
    float scale;
    std::memcpy(&scale, in + 4 * b, 4);
    const size_t lo = b * kInt8Block, hi = std::min(n, lo + kInt8Block);
    for (size_t i = lo; i < hi; ++i) out[i] = float(codes[i]) * scale;
  }
}

std::vector<Codec> choose_codecs(const std::vector<double>& mean_cos) {
  std::vector<double> sorted = mean_cos;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[(sorted.size() - 1) / 2];
  std::vector<Codec> out;
  for (double c : mean_cos) out.push_back(c >= median ? Codec::Int8 : Codec::Bf16);
  return out;
}

double codec_error_bound(Codec c, const float* x, size_t n) {
  double worst = 0;
  if (c == Codec::Bf16) {
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(x[i])) * std::ldexp(1.0, -8));
    return worst;
  }
  // int8: half a step of the block's scale, plus the float rounding of x*inv and q*scale (a few ulps of max|x|).
  for (size_t b = 0; b * kInt8Block < n; ++b) {
    double m = 0;
    for (size_t i = b * kInt8Block; i < std::min(n, (b + 1) * kInt8Block); ++i) m = std::max(m, std::fabs(double(x[i])));
    worst = std::max(worst, m / 254.0 + 4 * m * std::ldexp(1.0, -24));
  }
  return worst;
}

}  // namespace dd::sync
