// threshold / autothreshold: a layer averages when its gradient-direction signal, agreed over the ranks through
// the control all-reduce one step late, falls below the trigger line (fixed thr, or adapted per layer with auto=1).
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/policies/threshold.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 2;
}

ThresholdPolicy::ThresholdPolicy(const PolicySpec& s)
    : thr_(s.get_double("thr", 0.1, -1, 1)), ema_(s.get_double("ema", 0.9, 0, 0.9999)),
      aema_(s.get_double("aema", 0.5, 0, 0.9999)), z_(s.get_double("z", 1.0, -10, 10)),
      slow_(s.get_double("slow", 0.99, 0, 0.99999)),
      // The floor: every layer is averaged at least once per `max` steps (16: -0.46 point from ddp on the cnn
      // study, where 64 left threshold 1.28 points behind; experiments/results/convergence.md).
      max_(s.get_int("max", 16, 1, 1 << 20)),
      // At most one sync per `min` steps bounds the traffic to 1/min of ddp (25% by default) whatever the signal.
      min_(s.get_int("min", std::min<int64_t>(4, max_), 1, 1 << 20)), auto_(s.get_bool("auto", s.name == "autothreshold")) {
  s.allow_only({"thr", "ema", "aema", "min", "max", "auto", "z", "slow", "t"});
  caps_.voting = this;
  caps_.reporting = this;
  caps_.checkpointed = this;
  if (s.kv.count("t")) throw UsageError("--policy " + s.name + ": t= is the staleness cap of hybrid; use max= here");
  if (min_ > max_)
    throw UsageError("--policy " + s.name + ": min=" + std::to_string(min_) + " exceeds max=" + std::to_string(max_));
  if (auto_ && s.kv.count("thr"))
    throw UsageError("--policy " + s.name + ": auto=1 adapts the trigger line itself; drop thr= or use auto=0");
  if (!auto_ && (s.kv.count("z") || s.kv.count("slow")))
    throw UsageError("--policy " + s.name + ": z= and slow= tune the auto-tuned line; add auto=1");
}

std::string ThresholdPolicy::describe() const {
  std::ostringstream o;
  o << "threshold:";
  if (auto_) o << "auto=1,z=" << z_ << ",slow=" << slow_;
  else o << "thr=" << thr_;
  o << ",ema=" << ema_ << ",aema=" << aema_ << ",min=" << min_ << ",max=" << max_;
  return o.str();
}

void ThresholdPolicy::setup(const std::vector<LayerMeta>& layers, int world) {
  Policy::setup(layers, world);
  const size_t L = layers.size();
  local_ema_.assign(L, 1.0);
  cos_.assign(L, 1.0);
  disruption_.assign(L, 0.0);
  change_mean_.assign(L, 0.0);
  change_var_.assign(L, 0.0);
  last_sync_.assign(L, kNever);
  real_last_.assign(L, kNever);
  real_prev_.assign(L, kNever);
}

double ThresholdPolicy::line(int layer) const {
  if (!auto_) return thr_;
  // Bias-corrected slow moments of the direction change 1 - cos (Adam-style: they start at 0).
  const double w = 1 - std::pow(slow_, double(std::max<int64_t>(agreed_ - 1, 1)));
  const double mean = change_mean_.at(size_t(layer)) / w, var = change_var_.at(size_t(layer)) / w;
  return 1.0 - (mean + z_ * std::sqrt(std::max(0.0, var)));
}

bool ThresholdPolicy::synced_at(int layer, int64_t step) const {
  return real_last_[layer] == step || real_prev_[layer] == step;
}

int64_t ThresholdPolicy::last_sync(int layer, int64_t step) const {
  // A policy that starts mid-run (a switch) starts from an averaged model: as if every layer synced just before.
  return last_sync_[layer] == kNever ? step - 1 : last_sync_[layer];
}

Action ThresholdPolicy::decide(int layer, int64_t step) const {
  const int64_t gap = step - last_sync(layer, step);
  const bool sync = gap >= max_ || (gap >= min_ && has_signal() && signal(layer) < line(layer));
  return sync ? Action::AverageParams : Action::None;
}

void ThresholdPolicy::on_actions(int64_t step, const std::vector<Action>& actions) {
  for (size_t l = 0; l < actions.size(); ++l) {
    last_sync_[l] = last_sync(int(l), step);
    if (actions[l] == Action::None) continue;
    last_sync_[l] = step;
    real_prev_[l] = real_last_[l];
    real_last_[l] = step;
  }
}

void ThresholdPolicy::cast_votes(int64_t step, const LayerSignals& s, float* votes) {
  const size_t L = layers_.size();
  for (size_t l = 0; l < L; ++l) {
    const double c = s.cos_prev[l];
    // The first cos_prev is the engine's convention (1, no previous gradient yet), not a measurement.
    if (casts_ == 1) local_ema_[l] = c;
    else if (casts_ > 1) local_ema_[l] = ema_ * local_ema_[l] + (1 - ema_) * c;
    votes[2 * l] = float(local_ema_[l]);
    // The gradient right after an averaging was taken at the averaged point: how far its direction departs from
    // the layer's usual one measures the jump, i.e. how much the ranks disagreed.
    votes[2 * l + 1] = casts_ > 0 && synced_at(int(l), step - 1) ? float(c) : 0.0f;
  }
  ++casts_;
}

void ThresholdPolicy::on_agreed(int64_t step, const float* sums, int world) {
  ++agreed_;
  if (agreed_ == 1) return;  // the votes of the first step carry no measurement
  const size_t L = layers_.size();
  for (size_t l = 0; l < L; ++l) {
    const double c = double(sums[2 * l]) / world;
    if (agreed_ > 2 && synced_at(int(l), step - 1)) {
      const double after = double(sums[2 * l + 1]) / world;
      disruption_[l] = std::max(0.0, aema_ * disruption_[l] + (1 - aema_) * (cos_[l] - after));
    }
    cos_[l] = c;
    // The auto line's statistics: the usual direction change of this layer and how much it fluctuates.
    const double w = 1 - std::pow(slow_, double(agreed_ - 2)), change = 1 - c;
    const double dev = agreed_ > 2 ? change - change_mean_[l] / w : 0;
    change_mean_[l] = slow_ * change_mean_[l] + (1 - slow_) * change;
    change_var_[l] = slow_ * change_var_[l] + (1 - slow_) * dev * dev;
  }
}

std::string ThresholdPolicy::plan() const {
  std::ostringstream o;
  o << "threshold: a layer averages when its signal (mean over ranks of the EMA of cos(g_t, g_t-1), minus its "
       "disruption at syncs) < ";
  if (auto_) o << "its usual level (slow EMA of the direction change 1 - cos, plus " << z_ << " std; auto)";
  else o << thr_;
  o << ", at most every " << min_ << " and at least every " << max_
    << " steps; signals agreed one step late (2 floats/layer)";
  return o.str();
}

// Checkpoint: every member decide() depends on, so a resumed run decides exactly as the uninterrupted one.
std::string ThresholdPolicy::save_state() const {
  ByteWriter w;
  w.put_vec(local_ema_);
  w.put<int64_t>(casts_);
  for (auto* v : {&cos_, &disruption_, &change_mean_, &change_var_}) w.put_vec(*v);
  for (auto* v : {&last_sync_, &real_last_, &real_prev_}) w.put_vec(*v);
  w.put<int64_t>(agreed_);
  return w.bytes();
}

void ThresholdPolicy::load_state(const std::string& s) {
  ByteReader r(s);
  local_ema_ = r.get_vec<double>();
  casts_ = r.get<int64_t>();
  for (auto* v : {&cos_, &disruption_, &change_mean_, &change_var_}) *v = r.get_vec<double>();
  for (auto* v : {&last_sync_, &real_last_, &real_prev_}) *v = r.get_vec<int64_t>();
  agreed_ = r.get<int64_t>();
}


namespace {
const bool registered = register_policy("threshold", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<ThresholdPolicy>(s);
});
const bool registered_auto = register_policy("autothreshold", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<ThresholdPolicy>(s);
});
}  // namespace

}  // namespace dd::sync
