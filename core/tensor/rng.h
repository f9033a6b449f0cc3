// Portable deterministic RNG (splitmix64): identical streams on every platform and rank for the same seed.
#pragma once
#include <cmath>
#include <cstdint>

namespace dd {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits, exact in float.
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal() {
    double u1 = (double(next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = double(next() >> 11) * (1.0 / 9007199254740992.0);
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  uint64_t state() const { return s_; }
  void set_state(uint64_t s) { s_ = s; }

 private:
  uint64_t s_;
};

}  // namespace dd
