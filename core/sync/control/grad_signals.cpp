// GradSignals: norms and successive-gradient cosines per layer, in double, from the local gradient.
#include "core/sync/control/grad_signals.h"

#include <cmath>

namespace dd::sync {

void GradSignals::configure(bool on, int layers, int64_t num_params, bool constant) {
  on_ = on;
  if (!on) return;
  constant_ = constant;
  prev_.resize(constant ? 0 : size_t(num_params));
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
  float* prev = prev_.data() + r.param_off;
  double gg = 0, pp = 0, gp = 0;
  for (int64_t i = 0; i < r.param_n; ++i) {
    gg += double(g[i]) * g[i];
    pp += double(prev[i]) * prev[i];
    gp += double(g[i]) * prev[i];
    prev[i] = g[i];
  }
  s_.grad_norm[l] = std::sqrt(gg);
  s_.cos_prev[l] = has_prev_[l] && gg > 0 && pp > 0 ? gp / std::sqrt(gg * pp) : 1.0;
  s_.stale[l] = stale;
  has_prev_[l] = true;
}

void GradSignals::save(ByteWriter& w) const {
  w.put_bools(has_prev_);
  w.put_floats(prev_.data(), on_ ? prev_.size() : 0);  // constant: none
}

void GradSignals::load(ByteReader& r) {
  auto has_prev = r.get_bools();
  if (on_) has_prev_ = has_prev;
  r.get_floats(prev_.data(), on_ ? prev_.size() : 0);
}

}  // namespace dd::sync
