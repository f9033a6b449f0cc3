// staleness:t=T as a hard cap over any policy ("A+staleness:t=T"): the inner decision, but no layer goes T steps
// without a sync. Alone, every layer averages once per T steps.
#include <limits>

#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/policies/staleness.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 2;
}

StalenessCap::StalenessCap(std::unique_ptr<Policy> inner, int64_t t, std::string name)
    : inner_(std::move(inner)), t_(t), name_(std::move(name)) {
  if (inner_) {
    const Capabilities& in = inner_->caps();
    caps_.profiled = in.profiled;
    caps_.voting = in.voting;
    caps_.trialled = in.trialled;
    caps_.grouped = in.grouped;
    set_merge(inner_->merge());  // the wrapped policy's merge keys hold for every average, the cap's included
  }
  caps_.reporting = this;
  caps_.checkpointed = this;
}

std::string StalenessCap::describe() const {
  if (!name_.empty()) return name_;
  const std::string cap = "staleness:t=" + std::to_string(t_);
  return inner_ ? inner_->describe() + "+" + cap : cap;
}

void StalenessCap::setup(const std::vector<LayerMeta>& layers, int world) {
  Policy::setup(layers, world);
  if (inner_) inner_->setup(layers, world);
  last_sync_.assign(layers.size(), kNever);
}

Action StalenessCap::decide(int layer, int64_t step) const {
  // Starting mid-run (a switch, or after profiling in lock-step) starts from a synced model.
  const int64_t last = last_sync_[layer] == kNever ? step - 1 : last_sync_[layer];
  const Action a = inner_ ? inner_->decide(layer, step) : Action::None;
  return a == Action::None && step - last >= t_ ? Action::AverageParams : a;
}

void StalenessCap::on_actions(int64_t step, const std::vector<Action>& actions) {
  for (size_t l = 0; l < actions.size(); ++l) {
    if (last_sync_[l] == kNever) last_sync_[l] = step - 1;
    if (actions[l] != Action::None) last_sync_[l] = step;
  }
  // The inner policy learns the final actions: a sync the cap forced counts for it like its own (threshold's
  // min, max and disruption).
  if (inner_) inner_->on_actions(step, actions);
  // The inner policy's blocking whole-model average after this update is a sync of every layer.
  if (inner_ && inner_->full_average_after(step))
    for (auto& s : last_sync_) s = step;
}

bool StalenessCap::full_average_after(int64_t step) const { return inner_ && inner_->full_average_after(step); }

std::string StalenessCap::plan() const {
  std::string p = inner_reports() ? inner_reports()->plan() : "";
  return p + (p.empty() ? "" : "\n") + "staleness cap: every layer synced at least once every " +
         std::to_string(t_) + " steps";
}

// Checkpoint: the cap's counters, then the inner policy's state.
std::string StalenessCap::save_state() const {
  ByteWriter w;
  w.put_vec(last_sync_);
  Checkpointed* in = inner_ ? inner_->caps().checkpointed : nullptr;
  w.put_str(in ? in->save_state() : std::string());
  return w.bytes();
}

void StalenessCap::load_state(const std::string& s) {
  ByteReader r(s);
  last_sync_ = r.get_vec<int64_t>();
  const std::string inner = r.get_str();
  if (Checkpointed* in = inner_ ? inner_->caps().checkpointed : nullptr) in->load_state(inner);
}

namespace {

int64_t cap_t(const PolicySpec& s) {
  s.allow_only({"t"});
  return s.get_int("t", 8, 1, 1 << 20);
}

// "staleness:t=T" alone, or the composite "A+staleness:t=T" (either order), as PolicySpec::parse split it:
// make_policy hands every composite to this factory. The wrapped policy's merge keys are the composite's: its
// averages (including those the cap adds) are outer-stepped or compressed alike.
std::unique_ptr<Policy> make_staleness(const PolicySpec& s) {
  if (!s.composite()) return std::make_unique<StalenessCap>(nullptr, cap_t(s));
  int64_t t = 0;
  try {
    t = cap_t(*s.cap());
  } catch (const UsageError& e) {
    throw UsageError("--policy '" + s.text + "': the staleness cap takes t= only (merge keys go on the policy it " +
                     "wraps): " + e.what());
  }
  auto inner = make_policy(s.base());
  const MergeSpec& m = inner->merge();
  // The cap adds averages between the wrapped policy's own (a layer T steps from its last sync), so with a delay
  // two averages of one layer could be in flight at once (as dreamddp's fill-in would): refused, as there.
  if (m.delay > 0)
    throw UsageError("--policy '" + s.text + "': delay=" + std::to_string(m.delay) + " of " + s.base().name +
                     " cannot be combined with the staleness cap (it adds averages between " + s.base().name +
                     "'s own, and two of one layer would be in flight); drop delay= or the cap");
  return std::make_unique<StalenessCap>(std::move(inner), t);
}

const bool registered = register_policy("staleness", make_staleness);

}  // namespace

}  // namespace dd::sync
