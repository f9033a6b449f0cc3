// staleness:t=T, alone or as a cap over any policy ("A+staleness:t=T"); hybrid is threshold under this cap.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy.h"

namespace dd::sync {

// A + staleness:t=T: the inner policy's decision, except that a layer whose last sync would be T steps back is
// averaged now. The counter comes from this policy's own decisions, so it is rank-identical like the engine's.
// inner == nullptr means no inner policy ("staleness:t=T" alone: every layer averages once per T steps).
class StalenessCap : public Policy {
 public:
  StalenessCap(std::unique_ptr<Policy> inner, int64_t t, std::string name = "");
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) const override;
  void on_actions(int64_t step, const std::vector<Action>& actions) override;
  bool full_average_after(int64_t step) const override;
  int64_t profile_steps() const override;
  void start_at(int64_t step) override {
    Policy::start_at(step);
    if (inner_) inner_->start_at(step);
  }
  void on_profile(const LayerTimes& t) override;
  void on_step_begin(int64_t step) override {
    if (inner_) inner_->on_step_begin(step);
  }
  std::vector<int64_t> timed_periods() const override { return inner_ ? inner_->timed_periods() : std::vector<int64_t>{}; }
  void on_period_times(int64_t step, const std::vector<double>& s) override {
    if (inner_) inner_->on_period_times(step, s);
  }
  int votes_per_layer() const override;
  bool wants_signals() const override;
  void cast_votes(int64_t step, const LayerSignals& s, float* votes) override;
  void on_agreed(int64_t step, const float* vote_sums, int world) override;
  std::string plan() const override;
  int64_t plan_version() const override { return inner_ ? inner_->plan_version() : 0; }
  std::string decisions() const override { return inner_ ? inner_->decisions() : std::string(); }
  std::string save_state() const override;
  void load_state(const std::string& s) override;
  Policy* inner() const { return inner_.get(); }

 private:
  std::unique_ptr<Policy> inner_;
  int64_t t_;
  std::string name_;  // "hybrid" describes itself by its own spec
  std::vector<int64_t> last_sync_;
};

}  // namespace dd::sync
