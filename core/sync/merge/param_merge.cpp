// ParamMerge: anchors, outer momentum and residuals of transformed layer averages (see param_merge.h), on the
// parameters' device.
#include "core/sync/merge/param_merge.h"

#include <vector>

#include "core/ops/device_bytes.h"

namespace dd::sync {

void ParamMerge::configure(const MergeSpec& m, const float* params, bool sizes_only) {
  const bool had_anchor = anchor_.size() != 0;
  m_ = m;
  auto size = [&](ops::DeviceFloats& v, bool want) {
    want = want && !sizes_only;
    if (!want) v = ops::DeviceFloats(dev_);
    else if (v.size() == 0) v = ops::DeviceFloats(dev_, size_t(n_));  // zero-filled
  };
  auto size_host = [&](std::vector<float>& v, bool want) {
    want = want && !sizes_only;
    if (!want) std::vector<float>().swap(v);
    else if (v.empty()) v.assign(size_t(n_), 0.0f);
  };
  size(anchor_, m.transforms());
  size(mom_, m.nesterov);
  size_host(e1_, m.compress != Codec::None);
  size_host(e2_, m.owner_residual());
  if (!had_anchor && anchor_.size() != 0) anchor(params, 0, n_);
}

void ParamMerge::anchor(const float* params, int64_t off, int64_t n) {
  if (anchor_.size() == 0) return;
  dev_.copy(anchor_.data() + off, params + off, 4 * size_t(n));
}

void ParamMerge::payload(const float* orig, int64_t off, int64_t n, float* buf) const {
  if (m_.compress != Codec::None) dev_.sub(buf, orig, anchor_.data() + off, n);
  else dev_.copy(buf, orig, 4 * size_t(n));
}

void ParamMerge::finish(int64_t off, int64_t n, float* buf) {
  float* a = anchor_.data() + off;
  if (m_.compress != Codec::None) dev_.add_inplace(buf, a, n);
  if (m_.nesterov) {
    dev_.outer_nesterov(a, mom_.data() + off, buf, n, float(m_.outer_lr), float(m_.outer_momentum));
    dev_.copy(buf, a, 4 * size_t(n));
  } else {
    dev_.copy(a, buf, 4 * size_t(n));
  }
}

void ParamMerge::save(ByteWriter& w) const {
  for (const auto* v : {&anchor_, &mom_}) ops::put_device_floats(w, *v);
  for (const auto* v : {&e1_, &e2_}) w.put_floats(v->data(), v->size());
}

void ParamMerge::load(ByteReader& r) {
  for (auto* v : {&anchor_, &mom_}) ops::get_device_floats(r, *v);
  for (auto* v : {&e1_, &e2_}) r.get_floats(v->data(), v->size());
}

}  // namespace dd::sync
