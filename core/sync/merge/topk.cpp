// The sparse top-K payload with Elias-Fano indices (see topk.h).
#include "core/sync/merge/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "core/sync/merge/codec.h"

namespace dd::sync {
namespace {

// Low bits per index: floor(log2(n / k)) (0 when k >= n / 2).
int low_bits(size_t n, size_t k) {
  int l = 0;
  while (l < 40 && (uint64_t(k) << (l + 1)) <= uint64_t(n)) ++l;
  return l;
}

size_t value_bytes(size_t k, const TopK& t) { return t.int8 ? encoded_bytes(Codec::Int8, k) : 4 * k; }

void put_bits(uint8_t* out, uint64_t pos, uint64_t v, int nbits) {
  for (int b = 0; b < nbits; ++b, ++pos)
    if ((v >> b) & 1u) out[pos >> 3] |= uint8_t(1u << (pos & 7));
}

uint64_t get_bits(const uint8_t* in, uint64_t pos, int nbits) {
  uint64_t v = 0;
  for (int b = 0; b < nbits; ++b, ++pos) v |= uint64_t((in[pos >> 3] >> (pos & 7)) & 1u) << b;
  return v;
}

}  // namespace

size_t topk_count(size_t n, const TopK& t) {
  if (n == 0) return 0;
  const double k = std::ceil(double(n) * t.percent / 100.0);
  return std::clamp<size_t>(size_t(k), 1, n);
}

size_t elias_fano_bytes(size_t n, size_t k) {
  if (k == 0) return 0;
  const int l = low_bits(n, k);
  const uint64_t bits = uint64_t(k) * uint64_t(l) + uint64_t(k) + ((uint64_t(n) - 1) >> l) + 1;
  return size_t((bits + 7) / 8);
}

size_t topk_bytes(size_t n, const TopK& t) {
  const size_t k = topk_count(n, t);
  return value_bytes(k, t) + elias_fano_bytes(n, k);
}

void elias_fano_encode(const uint32_t* idx, size_t k, size_t n, uint8_t* out) {
  std::memset(out, 0, elias_fano_bytes(n, k));
  const int l = low_bits(n, k);
  const uint64_t high0 = uint64_t(k) * uint64_t(l);
  for (size_t i = 0; i < k; ++i) {
    put_bits(out, uint64_t(i) * uint64_t(l), idx[i], l);
    const uint64_t pos = high0 + (uint64_t(idx[i]) >> l) + i;
    out[pos >> 3] |= uint8_t(1u << (pos & 7));
  }
}

void elias_fano_decode(const uint8_t* in, size_t k, size_t n, uint32_t* idx) {
  if (k == 0) return;
  const int l = low_bits(n, k);
  const uint64_t high0 = uint64_t(k) * uint64_t(l), hbits = uint64_t(k) + ((uint64_t(n) - 1) >> l) + 1;
  size_t i = 0;
  for (uint64_t p = 0; p < hbits && i < k; ++p) {
    const uint64_t pos = high0 + p;
    if (!((in[pos >> 3] >> (pos & 7)) & 1u)) continue;
    const uint64_t v = ((p - i) << l) | get_bits(in, uint64_t(i) * uint64_t(l), l);
    if (v >= n || (i > 0 && v <= idx[i - 1])) throw std::runtime_error("topk payload: corrupt indices");
    idx[i++] = uint32_t(v);
  }
  if (i != k) throw std::runtime_error("topk payload: corrupt indices");
}

void topk_encode(const float* x, size_t n, const TopK& t, uint8_t* out, float* sent) {
  if (n >= (size_t(1) << 32)) throw std::invalid_argument("topk: a payload holds at most 2^32 - 1 values");
  const size_t k = topk_count(n, t);
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  // A total order: NaN first, then larger magnitude, then lower index (so every machine keeps the same entries).
  auto before = [x](uint32_t a, uint32_t b) {
    const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
    if (na != nb) return na;
    if (!na) {
      const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
      if (fa != fb) return fa > fb;
    }
    return a < b;
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + long(k), idx.end(), before);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  std::vector<float> v(k), d(k);
  for (size_t i = 0; i < k; ++i) v[i] = x[idx[i]];
  if (t.int8) {
    encode(Codec::Int8, v.data(), k, out);
    decode(Codec::Int8, out, k, d.data());
  } else {
    std::memcpy(out, v.data(), 4 * k);
    d = v;
  }
  elias_fano_encode(idx.data(), k, n, out + value_bytes(k, t));
  std::fill(sent, sent + n, 0.0f);
  for (size_t i = 0; i < k; ++i) sent[idx[i]] = d[i];
}

void topk_decode_add(const uint8_t* in, size_t n, const TopK& t, double* sum) {
  const size_t k = topk_count(n, t);
  std::vector<uint32_t> idx(k);
  std::vector<float> d(k);
  elias_fano_decode(in + value_bytes(k, t), k, n, idx.data());
  if (t.int8) decode(Codec::Int8, in, k, d.data());
  else std::memcpy(d.data(), in, 4 * k);
  for (size_t i = 0; i < k; ++i) sum[idx[i]] += double(d[i]);
}

}  // namespace dd::sync
