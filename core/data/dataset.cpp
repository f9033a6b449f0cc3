// Dataset::sample_numel and copying samples into a Batch.
#include "core/data/dataset.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace dd::data {

int64_t Dataset::sample_numel() const {
  int64_t n = 1;
  for (int64_t d : x_shape) n *= d;
  return n;
}

void gather(const Dataset& d, const int64_t* idx, int64_t n, Batch* out) {
  const int64_t numel = d.sample_numel();
  DD_CHECK(d.replicas >= 1 && numel % d.replicas == 0, "dataset '" + d.name + "' has a bad channel replication");
  const int64_t stored = numel / d.replicas;  // numbers held per sample (one plane of a replicated image)
  const int64_t tl = d.target_len;
  out->n = n;
  if (d.tokens) {
    out->xi.resize(size_t(n * numel));
    out->xf.clear();
  } else {
    out->xf.resize(size_t(n * numel));
    out->xi.clear();
  }
  out->y.resize(size_t(n * tl));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = idx[i];
    DD_CHECK(s >= 0 && s < d.size, "sample index " + std::to_string(s) + " outside dataset '" + d.name +
                                       "' of " + std::to_string(d.size) + " samples");
    if (d.tokens)
      std::copy_n(d.xi.data() + s * numel, numel, out->xi.data() + i * numel);
    else
      for (int64_t c = 0; c < d.replicas; ++c)
        std::copy_n(d.xf.data() + s * stored, stored, out->xf.data() + i * numel + c * stored);
    std::copy_n(d.y.data() + s * tl, tl, out->y.data() + i * tl);
  }
}

void gather_range(const Dataset& d, int64_t first, int64_t n, Batch* out) {
  DD_CHECK(first >= 0 && n >= 0 && first + n <= d.size,
           "range [" + std::to_string(first) + ", " + std::to_string(first + n) + ") outside dataset '" +
               d.name + "' of " + std::to_string(d.size) + " samples");
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = first + i;
  gather(d, idx.data(), n, out);
}

}  // namespace dd::data
