// staleness:t=T, alone or as a cap over any policy ("A+staleness:t=T"); hybrid is threshold under this cap.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// A + staleness:t=T: the inner policy's decision, except that a layer whose last sync would be T steps back is
// averaged now. The counter comes from this policy's own decisions, so it is rank-identical like the engine's.
// inner == nullptr means no inner policy ("staleness:t=T" alone: every layer averages once per T steps).
// Capabilities: the inner policy's profile, votes, trial and groups are its own (caps() points at the inner
// policy's); its plan gains the cap's line, and its checkpoint holds the cap's counters before the inner state.
class StalenessCap : public Policy, public Reporting, public Checkpointed {
 public:
  StalenessCap(std::unique_ptr<Policy> inner, int64_t t, std::string name = "");
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) const override;
  void on_actions(int64_t step, const std::vector<Action>& actions) override;
  bool full_average_after(int64_t step) const override;
  void start_at(int64_t step) override {
    Policy::start_at(step);
    if (inner_) inner_->start_at(step);
  }
  void on_step_begin(int64_t step) override {
    if (inner_) inner_->on_step_begin(step);
  }
  std::string plan() const override;
  int64_t plan_version() const override { return inner_reports() ? inner_reports()->plan_version() : 0; }
  std::string decisions() const override { return inner_reports() ? inner_reports()->decisions() : std::string(); }
  std::string save_state() const override;
  void load_state(const std::string& s) override;
  Policy* inner() const { return inner_.get(); }

 private:
  Reporting* inner_reports() const { return inner_ ? inner_->caps().reporting : nullptr; }

  std::unique_ptr<Policy> inner_;
  int64_t t_;
  std::string name_;  // "hybrid" describes itself by its own spec
  std::vector<int64_t> last_sync_;
};

}  // namespace dd::sync
