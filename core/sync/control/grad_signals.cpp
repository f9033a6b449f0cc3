// GradSignals: norms and successive-gradient cosines per layer, in double, from the local gradient, on the
// gradients' device.
#include "core/sync/control/grad_signals.h"

#include <cmath>

#include "core/ops/device_bytes.h"

namespace dd::sync {

void GradSignals::configure(bool on, int layers, int64_t num_params, bool constant, ops::Device& dev) {
  on_ = on;
  if (!on) return;
  constant_ = constant;
  prev_ = ops::DeviceFloats(dev, constant ? 0 : size_t(num_params));  // zero-filled
  s_.grad_norm.assign(size_t(layers), 0);
  s_.cos_prev.assign(size_t(layers), 1);
  s_.stale.assign(size_t(layers), 0);
  has_prev_.assign(size_t(layers), false);
}

void GradSignals::take(int l, const LayerRange& r, const float* g, int64_t stale) {
  s_.stale[l] = stale;
  if (constant_) {
    s_.grad_norm[l] = s_.cos_prev[l] = 1.0;
    return;
  }
  ops::Device& dev = prev_.device();
  float* prev = prev_.data() + r.param_off;
  double s[3];  // (g.g, prev.prev, g.prev)
  dev.dot3(g, prev, r.param_n, s);
  dev.copy(prev, g, 4 * size_t(r.param_n));
  // The hook launches this layer's collective next, whose result may land in g: the copy must have read it.
  dev.synchronize();
  const double gg = s[0], pp = s[1], gp = s[2];
  s_.grad_norm[l] = std::sqrt(gg);
  s_.cos_prev[l] = has_prev_[l] && gg > 0 && pp > 0 ? gp / std::sqrt(gg * pp) : 1.0;
  s_.stale[l] = stale;
  has_prev_[l] = true;
}

void GradSignals::save(ByteWriter& w) const {
  w.put_bools(has_prev_);
  ops::put_device_floats(w, prev_, on_ ? prev_.size() : 0);  // constant: none
}

void GradSignals::load(ByteReader& r) {
  auto has_prev = r.get_bools();
  if (on_) has_prev_ = has_prev;
  ops::get_device_floats(r, prev_, on_ ? prev_.size() : 0);
}

}  // namespace dd::sync
