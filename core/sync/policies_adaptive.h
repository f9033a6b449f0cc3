// The adaptive policy family (issue 5): fixed per-layer periods, the gradient-direction threshold (and its
// auto-tuned variant), the staleness cap composable with any policy as "A+staleness:t=T", and hybrid. Classes are
// declared here so tests can look at periods and signals; users pick them with --policy (see POLICIES.md).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy.h"

namespace dd::sync {

// Shell-style match of a whole layer name: '*' is any run of characters (dots included), '?' one character.
bool glob_match(const std::string& pattern, const std::string& name);

// fixed: layer l averages its parameters once per K_l steps, at steps where (step - offset_l) % K_l == 0
// (K_l = 1: gradient all-reduce every step). K_l by rule (in/mid/out) or by name patterns, first match wins.
class FixedPolicy : public Policy {
 public:
  explicit FixedPolicy(const PolicySpec& s);
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) override;
  std::string plan() const override;
  int period(int layer) const { return period_.at(size_t(layer)); }
  int offset(int layer) const { return offset_.at(size_t(layer)); }

 private:
  int in_ = 8, mid_ = 4, out_ = 1, dflt_ = 4;
  std::vector<std::pair<std::string, int>> patterns_;  // in the order given
  bool by_pattern_ = false;
  std::vector<int> period_, offset_;
};

// The rule of `fixed`: 0 input (embedding layers; without any, the first layer and the norm layers right after
// it), 2 output head (the last layer), 1 everything in between.
std::vector<int> layer_roles(const std::vector<LayerMeta>& layers);

// threshold: a layer averages when its agreed signal drops below the trigger line, at least min and at most max
// steps after its previous sync. Signal = mean over ranks of each rank's EMA of cos(g_t, g_{t-1}) minus the
// layer's disruption at its syncs (how much that cosine falls across an averaging: the jump from the local to the
// averaged parameters is large when ranks disagree). Line = thr, or with auto=1 adapted per layer from the slow
// EMA of its direction change 1 - cos and its spread: sync when the change exceeds its usual level by z std. Two votes per layer, so every input to decide() is rank-identical.
class ThresholdPolicy : public Policy {
 public:
  explicit ThresholdPolicy(const PolicySpec& s);
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) override;
  int votes_per_layer() const override { return 2; }
  void cast_votes(int64_t step, const LayerSignals& s, float* votes) override;
  void on_agreed(int64_t step, const float* vote_sums, int world) override;
  std::string plan() const override;

  // A sync this policy did not decide (a staleness cap overriding its None): counts for min, max and the
  // disruption measurement like its own.
  void note_sync(int layer, int64_t step);
  std::string save_state() const override;
  void load_state(const std::string& s) override;

  double signal(int layer) const { return cos_.at(size_t(layer)) - disruption_.at(size_t(layer)); }
  double line(int layer) const;
  double agreed_cos(int layer) const { return cos_.at(size_t(layer)); }
  double disruption(int layer) const { return disruption_.at(size_t(layer)); }
  bool has_signal() const { return agreed_ > 1; }

 private:
  bool synced_at(int layer, int64_t step) const;

  double thr_, ema_, aema_, z_, slow_;
  int64_t max_, min_;  // max_ first: min_ defaults from it
  bool auto_;
  // Rank-local: this rank's EMA of its own cos_prev (only ever leaves the rank as a vote).
  std::vector<double> local_ema_;
  int64_t casts_ = 0;
  // Rank-identical: agreed numbers and this policy's own decisions.
  std::vector<double> cos_, disruption_, change_mean_, change_var_;  // change_*: auto line
  std::vector<int64_t> last_sync_, decided_step_, real_last_, real_prev_;  // real_*: actual syncs, newest two
  std::vector<Action> decided_;
  int64_t agreed_ = 0;
};

// A + staleness:t=T: the inner policy's decision, except that a layer whose last sync would be T steps back is
// averaged now. The counter comes from this policy's own decisions, so it is rank-identical like the engine's.
// inner == nullptr means no inner policy ("staleness:t=T" alone: every layer averages once per T steps).
class StalenessCap : public Policy {
 public:
  StalenessCap(std::unique_ptr<Policy> inner, int64_t t, std::string name = "");
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) override;
  bool full_average_after(int64_t step) const override;
  int64_t profile_steps() const override;
  void on_profile(const LayerTimes& t) override;
  int votes_per_layer() const override;
  bool wants_signals() const override;
  void cast_votes(int64_t step, const LayerSignals& s, float* votes) override;
  void on_agreed(int64_t step, const float* vote_sums, int world) override;
  std::string plan() const override;
  int64_t plan_version() const override { return inner_ ? inner_->plan_version() : 0; }
  std::string save_state() const override;
  void load_state(const std::string& s) override;
  Policy* inner() const { return inner_.get(); }

 private:
  std::unique_ptr<Policy> inner_;
  int64_t t_;
  std::string name_;  // "hybrid" describes itself by its own spec
  std::vector<int64_t> last_sync_, decided_step_;
  std::vector<Action> decided_;
  int64_t prev_step_ = -1;
};

// fixed, threshold, autothreshold, staleness, hybrid; nullptr for other names.
std::unique_ptr<Policy> make_adaptive_policy(const PolicySpec& s);
// "A+staleness:t=T" (either order); nullptr when the spec has no '+'.
std::unique_ptr<Policy> make_composite_policy(const PolicySpec& s);

}  // namespace dd::sync
