// ParamMerge: anchors, outer momentum and residuals of transformed layer averages (see param_merge.h).
#include "core/sync/merge/param_merge.h"

#include <algorithm>
#include <stdexcept>

namespace dd::sync {

void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = anchor[i] - avg[i];
    mom[i] = mu * mom[i] + g;
    anchor[i] -= lr * (g + mu * mom[i]);
  }
}

void ParamMerge::configure(const MergeSpec& m, const float* params, bool sizes_only) {
  const bool had_anchor = !anchor_.empty();
  m_ = m;
  auto size = [&](std::vector<float>& v, bool want) {
    want = want && !sizes_only;
    if (!want) std::vector<float>().swap(v);
    else if (v.empty()) v.assign(size_t(n_), 0.0f);
  };
  size(anchor_, m.transforms());
  size(mom_, m.nesterov);
  size(e1_, m.compress != Codec::None);
  size(e2_, m.owner_residual());
  if (!had_anchor && !anchor_.empty()) anchor(params, 0, n_);
}

void ParamMerge::anchor(const float* params, int64_t off, int64_t n) {
  if (anchor_.empty()) return;
  std::copy(params + off, params + off + n, anchor_.begin() + off);
}

void ParamMerge::payload(const float* orig, int64_t off, int64_t n, float* buf) const {
  if (m_.compress != Codec::None) {
    const float* a = anchor_.data() + off;
    for (int64_t i = 0; i < n; ++i) buf[i] = orig[i] - a[i];
  } else {
    std::copy(orig, orig + n, buf);
  }
}

void ParamMerge::finish(int64_t off, int64_t n, float* buf) {
  float* a = anchor_.data() + off;
  if (m_.compress != Codec::None)
    for (int64_t i = 0; i < n; ++i) buf[i] += a[i];
  if (m_.nesterov) {
    outer_nesterov(a, mom_.data() + off, buf, n, float(m_.outer_lr), float(m_.outer_momentum));
    std::copy(a, a + n, buf);
  } else {
    std::copy(buf, buf + n, a);
  }
}

void ParamMerge::save(ByteWriter& w) const {
  w.put_floats(anchor_.data(), anchor_.size());
  w.put_floats(mom_.data(), mom_.size());
  w.put_floats(e1_.data(), e1_.size());
  w.put_floats(e2_.data(), e2_.size());
}

void ParamMerge::load(ByteReader& r) {
  r.get_floats(anchor_.data(), anchor_.size());
  r.get_floats(mom_.data(), mom_.size());
  r.get_floats(e1_.data(), e1_.size());
  r.get_floats(e2_.data(), e2_.size());
}

}  // namespace dd::sync
