// Fisher-Yates permutation over the portable splitmix64 stream.
#include "core/data/shuffle.h"

#include <utility>

#include "base/error.h"

namespace dd::data {

void permutation(int64_t n, uint64_t seed, uint64_t stream, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  SplitMix64 rng(derive_seed(seed, stream));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = int64_t(rng.below(uint64_t(i) + 1));
    std::swap(out[i], out[j]);
  }
}

std::vector<int64_t> fixed_subset(int64_t n, int64_t count, uint64_t seed) {
  if (count < 0 || count > n)
    throw dd::UsageError("cannot pick " + std::to_string(count) + " fixed samples from a dataset of " +
                         std::to_string(n));
  // The top stream number is never reached by an epoch counter.
  std::vector<int64_t> perm(static_cast<size_t>(n));
  permutation(n, seed, ~uint64_t(0), perm.data());
  perm.resize(size_t(count));
  return perm;
}

}  // namespace dd::data
