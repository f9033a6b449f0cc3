// Example user policy, `normdrift`: a layer averages its parameters when its gradient norm has drifted by more
// than `drift` (relative) since the layer's last sync, or after `max` steps at the latest.
//
// This file is the whole policy: it is compiled into `dreamddp` because app/policies/*.cpp are, and the
// registration at the bottom makes `--policy normdrift:drift=0.3,max=16` work. Nothing else changes. Copy it to
// write your own.
#include <cmath>
#include <sstream>

#include "core/sync/policy/registry.h"

namespace {

using dd::sync::Action;

// The core interface (decide, on_actions, ...) plus one optional capability, Voting: this policy decides from
// local statistics, so it takes on the votes that turn them into numbers every rank agrees on.
class NormDriftPolicy : public dd::sync::Policy, public dd::sync::Voting {
 public:
  // Keys and defaults; PolicySpec checks ranges and refuses unknown keys (exit 2 with a clear message).
  explicit NormDriftPolicy(const dd::sync::PolicySpec& s)
      : drift_(s.get_double("drift", 0.3, 0.0, 100.0)), max_(s.get_int("max", 16, 1, 1 << 20)) {
    s.allow_only({"drift", "max"});
    caps_.voting = this;  // the engine asks for votes only of a policy that names the capability
  }
  std::string describe() const override {
    std::ostringstream o;
    o << "normdrift:drift=" << drift_ << ",max=" << max_;
    return o.str();
  }
  void setup(const std::vector<dd::sync::LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    ref_.assign(layers.size(), 0.0);
    norm_.assign(layers.size(), 0.0);
    last_.assign(layers.size(), 0);
  }

  // The consistency rule: a rank's own gradient norms are local statistics, so they are only ever used as votes.
  // The engine sums the votes over ranks (one small asynchronous all-reduce) and hands them back one step later.
  int votes_per_layer() const override { return 1; }
  void cast_votes(int64_t, const dd::sync::LayerSignals& s, float* votes) override {
    for (size_t l = 0; l < s.grad_norm.size(); ++l) votes[l] = float(s.grad_norm[l]);
  }
  void on_agreed(int64_t, const float* sums, int world) override {
    for (size_t l = 0; l < norm_.size(); ++l) {
      norm_[l] = double(sums[l]) / world;          // mean gradient norm over the ranks: identical everywhere
      if (ref_[l] == 0.0) ref_[l] = norm_[l];       // first agreed value is the reference
    }
  }

  // decide() sees only rank-identical state (the step, agreed norms, its own past syncs), so every rank launches
  // the same collectives. It is const: what a sync changes is recorded in on_actions, which the engine calls with
  // the actions it took (also syncs that a staleness cap added, as in normdrift+staleness:t=4).
  Action decide(int l, int64_t step) const override {
    const bool drifted = ref_[l] > 0 && std::fabs(norm_[l] / ref_[l] - 1.0) > drift_;
    return step - last_[l] < max_ && !drifted ? Action::None : Action::AverageParams;
  }
  void on_actions(int64_t step, const std::vector<Action>& actions) override {
    for (size_t l = 0; l < actions.size(); ++l)
      if (actions[l] != Action::None) last_[l] = step, ref_[l] = norm_[l];
  }

 private:
  double drift_;
  int64_t max_;
  std::vector<double> ref_, norm_;
  std::vector<int64_t> last_;
};

const bool registered = dd::sync::register_policy(
    "normdrift", [](const dd::sync::PolicySpec& s) -> std::unique_ptr<dd::sync::Policy> {
      return std::make_unique<NormDriftPolicy>(s);
    });

}  // namespace
