// Synthetic dataset: seeded random inputs and labels, for throughput runs without I/O.
#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/shuffle.h"

namespace dd::data {

Dataset make_synthetic(const std::vector<int64_t>& x_shape, bool tokens, int num_classes, int64_t size,
                       uint64_t seed) {
  if (size < 1) throw dd::UsageError("synthetic dataset needs at least one sample");
  if (num_classes < 1) throw dd::UsageError("synthetic dataset needs at least one class");
  if (x_shape.empty()) throw dd::UsageError("synthetic dataset needs a sample shape");
  for (int64_t d : x_shape)
    if (d < 1) throw dd::UsageError("synthetic sample shape has a non-positive dimension");
  if (tokens && x_shape.size() != 1) throw dd::UsageError("synthetic token samples have shape {T}");

  Dataset d;
  d.name = "synthetic";
  d.size = size;
  d.x_shape = x_shape;
  d.tokens = tokens;
  d.num_classes = num_classes;
  d.target_len = tokens ? x_shape[0] : 1;
  const int64_t numel = d.sample_numel();
  SplitMix64 rng(derive_seed(seed, 0x53594e5448ull));  // "SYNTH": apart from the data-order streams
  if (tokens) {
    d.xi.resize(size_t(size * numel));
    for (int32_t& v : d.xi) v = int32_t(rng.below(uint64_t(num_classes)));
  } else {
    // Sum of two 24-bit uniforms, computed in integers so the result is bit-identical everywhere:
    // triangular on [-1, 1) scaled to unit variance (variance of the sum is 1/6).
    const float scale = 2.449489742783178f / 16777216.0f;  // sqrt(6) / 2^24
    d.xf.resize(size_t(size * numel));
    for (float& v : d.xf) {
      const uint64_t r = rng.next();
      const int64_t s = int64_t(r >> 40) + int64_t((r >> 8) & 0xFFFFFFu) - (int64_t(1) << 24);
      v = float(s) * scale;
    }
  }
  d.y.resize(size_t(size * d.target_len));
  for (int32_t& v : d.y) v = int32_t(rng.below(uint64_t(num_classes)));
  return d;
}

}  // namespace dd::data
