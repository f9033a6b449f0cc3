// Portable data-order randomness: splitmix64, an unbiased bounded draw, and a Fisher-Yates permutation.
// Written out here (not std::shuffle / std::uniform_int_distribution, which are implementation-defined) so the
// data order is the same on every compiler, platform and rank; data/README.md states the exact rule.
#pragma once
#include <cstdint>
#include <vector>

namespace dd::data {

// splitmix64's output function (Steele, Lea, Flood 2014).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : s_(state) {}
  uint64_t next() { return mix64(s_ += 0x9E3779B97F4A7C15ull); }
  // Uniform in [0, bound), bound >= 1, without modulo bias: draws below 2^64 mod bound are rejected.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t s_;
};

// Independent stream `stream` of seed `seed` (epoch e of the data order is stream e).
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return mix64(seed ^ mix64(stream + 0x9E3779B97F4A7C15ull));
}

// out[0..n) = a permutation of 0..n-1: identity, then for i = n-1 down to 1 swap out[i] with out[below(i+1)],
// drawing from SplitMix64(derive_seed(seed, stream)).
void permutation(int64_t n, uint64_t seed, uint64_t stream, int64_t* out);

// `count` distinct sample indices below n, fixed by `seed`, independent of the training order's streams
// (e.g. the sensitivity probe's fixed batch): the first `count` entries of a permutation on a reserved stream.
std::vector<int64_t> fixed_subset(int64_t n, int64_t count, uint64_t seed);

}  // namespace dd::data
