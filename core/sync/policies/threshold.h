// threshold / autothreshold (POLICIES.md). Declared for tests that read its signals and line, and for hybrid.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// threshold: a layer averages when its agreed signal drops below the trigger line, at least min and at most max
// steps after its previous sync. Signal = mean over ranks of each rank's EMA of cos(g_t, g_{t-1}) minus the
// layer's disruption at its syncs (how much that cosine falls across an averaging: the jump from the local to the
// averaged parameters is large when ranks disagree). Line = thr, or with auto=1 adapted per layer from the slow
// EMA of its direction change 1 - cos and its spread: sync when the change exceeds its usual level by z std. Two votes per layer, so every input to decide() is rank-identical.
class ThresholdPolicy : public Policy, public Voting, public Reporting, public Checkpointed {
 public:
  explicit ThresholdPolicy(const PolicySpec& s);
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) const override;
  // Every sync of a layer counts for min, max and the disruption measurement, also one this policy did not decide
  // (a staleness cap overriding its None reports the final actions).
  void on_actions(int64_t step, const std::vector<Action>& actions) override;
  int votes_per_layer() const override { return 2; }
  void cast_votes(int64_t step, const LayerSignals& s, float* votes) override;
  void on_agreed(int64_t step, const float* vote_sums, int world) override;
  std::string plan() const override;

  std::string save_state() const override;
  void load_state(const std::string& s) override;

  double signal(int layer) const { return cos_.at(size_t(layer)) - disruption_.at(size_t(layer)); }
  double line(int layer) const;
  double agreed_cos(int layer) const { return cos_.at(size_t(layer)); }
  double disruption(int layer) const { return disruption_.at(size_t(layer)); }
  bool has_signal() const { return agreed_ > 1; }

 private:
  bool synced_at(int layer, int64_t step) const;
  int64_t last_sync(int layer, int64_t step) const;  // before its first step: as if synced just before it

  double thr_, ema_, aema_, z_, slow_;
  int64_t max_, min_;  // max_ first: min_ defaults from it
  bool auto_;
  // Rank-local: this rank's EMA of its own cos_prev (only ever leaves the rank as a vote).
  std::vector<double> local_ema_;
  int64_t casts_ = 0;
  // Rank-identical: agreed numbers and this policy's own decisions.
  std::vector<double> cos_, disruption_, change_mean_, change_var_;  // change_*: auto line
  std::vector<int64_t> last_sync_, real_last_, real_prev_;  // real_*: actual syncs, newest two
  int64_t agreed_ = 0;
};

}  // namespace dd::sync
