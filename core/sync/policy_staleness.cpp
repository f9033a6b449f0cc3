// staleness:t=T as a hard cap over any policy ("A+staleness:t=T"): the inner decision, but no layer goes T steps
// without a sync. Alone, every layer averages once per T steps.
#include <limits>

#include "core/sync/policies_adaptive.h"

namespace dd::sync {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 2;
}

StalenessCap::StalenessCap(std::unique_ptr<Policy> inner, int64_t t, std::string name)
    : inner_(std::move(inner)), t_(t), name_(std::move(name)) {}

std::string StalenessCap::describe() const {
  if (!name_.empty()) return name_;
  const std::string cap = "staleness:t=" + std::to_string(t_);
  return inner_ ? inner_->describe() + "+" + cap : cap;
}

void StalenessCap::setup(const std::vector<LayerMeta>& layers, int world) {
  Policy::setup(layers, world);
  if (inner_) inner_->setup(layers, world);
  last_sync_.assign(layers.size(), kNever);
  decided_step_.assign(layers.size(), kNever);
  decided_.assign(layers.size(), Action::None);
  prev_step_ = -1;
}

Action StalenessCap::decide(int layer, int64_t step) {
  if (step != prev_step_) {
    // The inner policy's blocking whole-model average after the previous update is a sync of every layer.
    if (prev_step_ >= 0 && inner_ && inner_->full_average_after(prev_step_))
      for (auto& s : last_sync_) s = prev_step_;
    prev_step_ = step;
  }
  if (decided_step_[layer] == step) return decided_[layer];
  // Starting mid-run (a switch, or after profiling in lock-step) starts from a synced model.
  if (last_sync_[layer] == kNever) last_sync_[layer] = step - 1;
  Action a = inner_ ? inner_->decide(layer, step) : Action::None;
  if (a == Action::None && step - last_sync_[layer] >= t_) {
    a = Action::AverageParams;
    if (auto* th = dynamic_cast<ThresholdPolicy*>(inner_.get())) th->note_sync(layer, step);
  }
  if (a != Action::None) last_sync_[layer] = step;
  decided_step_[layer] = step;
  decided_[layer] = a;
  return a;
}

bool StalenessCap::full_average_after(int64_t step) const { return inner_ && inner_->full_average_after(step); }
int64_t StalenessCap::profile_steps() const { return inner_ ? inner_->profile_steps() : 0; }
void StalenessCap::on_profile(const LayerTimes& t) {
  if (inner_) inner_->on_profile(t);
}
int StalenessCap::votes_per_layer() const { return inner_ ? inner_->votes_per_layer() : 0; }
bool StalenessCap::wants_signals() const { return inner_ && inner_->wants_signals(); }
void StalenessCap::cast_votes(int64_t step, const LayerSignals& s, float* votes) {
  if (inner_) inner_->cast_votes(step, s, votes);
}
void StalenessCap::on_agreed(int64_t step, const float* sums, int world) {
  if (inner_) inner_->on_agreed(step, sums, world);
}

std::string StalenessCap::plan() const {
  std::string p = inner_ ? inner_->plan() : "";
  return p + (p.empty() ? "" : "\n") + "staleness cap: every layer synced at least once every " +
         std::to_string(t_) + " steps";
}

}  // namespace dd::sync
