// DreamDdpPolicy, dreamddp:h=H (dreamddp.cpp describes the policy). Its member functions in one file per job:
//   dreamddp.cpp         the spec, the profile (self-measured, from profile=DIR or replayed), the schedule, decide
//   dreamddp_trial.cpp   the measured trial of Local SGD's schedule, and reading a recorded run's decisions (replay=)
//   dreamddp_observe.cpp the default start: plsgd's groups while the engine records, the solved plan from a boundary
//   dreamddp_report.cpp  the plan rank 0 prints, the decisions metrics.h5 records, the checkpoint
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/policy/policy_spec.h"
#include "core/sync/profile/profile_io.h"
#include "core/sync/schedule/schedule_choice.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

class DreamDdpPolicy : public Policy, public Profiled, public Trialled, public Reporting, public Checkpointed {
 public:
  explicit DreamDdpPolicy(const PolicySpec& s);
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) const override;
  // Local SGD's schedule: the whole model, blocking, after the update of every H-th step.
  bool full_average_after(int64_t step) const override { return local_at(step) && (step + 1) % h_ == 0; }
  void on_step_begin(int64_t step) override;

  // Profiled: lock-step until it has a profile (lockstep=1), or records taken from ordinary steps (the default).
  int64_t profile_steps() const override { return !observe_ && phase_.empty() ? profile_steps_ : 0; }
  int64_t observe_steps() const override { return observe_ && phase_.empty() ? observe_window() : 0; }
  void on_profile(const LayerTimes& measured) override;

  // Trialled (dreamddp_trial.cpp).
  int64_t settled_after(int64_t from) const override;
  std::vector<int64_t> timed_periods() const override;
  void on_period_times(int64_t step, const std::vector<double>& s) override;

  // Reporting and Checkpointed (dreamddp_report.cpp).
  std::string plan() const override;
  int64_t plan_version() const override {
    return phase_.empty() || (observe_ && switch_at_ < 0) ? 0 : 1 + decisions_;
  }
  std::string decisions() const override;
  std::string save_state() const override;
  void load_state(const std::string& s) override;

 private:
  // Fill-in is on for the plain in-step average; off with a delay (it cannot be combined) and with an outer
  // optimizer or compression (each extra average would be one more outer step / encoded payload; ask with fillin=1).
  bool default_fillin() const { return delay_ == 0 && !merge_.transforms(); }
  // A self-profiled schedule may be measured against Local SGD's (the run depends on timing anyway); a run from
  // profile=DIR or replay=RUN_DIR is a function of its inputs.
  bool default_trial() const { return profile_dir_.empty() && replay_dir_.empty(); }
  // The default start (dreamddp_observe.cpp): no lock-step window, a trial only where the model cannot tell; plsgd's contiguous groups run while
  // the engine records ready times and all-reduces (with a delay, an outer optimizer or compression: their averages
  // on copies, as they run), and the plan solved from them runs from a period boundary. Self-profiled only
  // (lockstep=1 keeps the lock-step window).
  bool default_observe() const { return profile_dir_.empty() && replay_dir_.empty(); }
  int64_t observe_window() const { return std::max<int64_t>(profile_steps_, 2 * int64_t(h_)); }
  // The solved plan is in force at `step` (always, outside the default start).
  bool solved_at(int64_t step) const { return !observe_ || (switch_at_ >= 0 && step >= switch_at_); }
  int64_t switch_bound(int64_t from) const;  // dreamddp_observe.cpp
  void setup_default_plan();
  void place_switch(int64_t step);
  std::string observe_plan() const;
  // The schedule the model chose (a trial's verdict may differ; local_sgd_ is what runs).
  bool local_sgd_model() const { return model_local_sgd_; }

  // A recorded run's decisions (its metrics.h5 /decisions, the first dreamddp policy that ran there).
  struct Replay {
    bool self_profiled = false;
    std::vector<std::string> names;
    LayerTimes times;
    std::vector<int> phase;
    FillIn fill;
    bool model_local_sgd = false;
    bool trial = false;
    int64_t trial_offset = 0;  // the trial's first step from the policy's first step
    bool trial_local_sgd = false;
    double trial_layerwise_s = 0, trial_local_s = 0;
    bool observed = false;  // recorded from ordinary steps (the default start), not lock-step
  };
  void load_replay();  // dreamddp_trial.cpp

  // Local SGD's schedule at `step`: the trial's windows 1 and 2, else the decision.
  bool local_at(int64_t step) const {
    if (!solved_at(step)) return false;
    if (trial_pending_ && trial_start_ >= 0 && step >= trial_start_ &&
        step < trial_start_ + kTrialPeriods * int64_t(h_)) {
      const int64_t w = (step - trial_start_) / h_;
      return w == 1 || w == 2;
    }
    return local_sgd_;
  }
  // The trial's first step for a policy first asked at `step`: the period boundary after one whole period.
  int64_t first_trial_step(int64_t step) const { return (step + h_ - 1) / h_ * h_ + h_; }
  static constexpr int kTrialPeriods = 4;  // layer-wise, Local SGD, Local SGD, layer-wise
  static constexpr double kTrialMargin = 0.10;
  static constexpr double kContended = 0.05;  // below: the probe's own noise (a few % on a quiet machine)
  static bool contended(const Contention& k) { return std::max(k.compute, k.comm) >= kContended; }

  int h_;
  MergeSpec merge_;
  int delay_;
  bool fillin_;
  std::string profile_dir_, replay_dir_;
  int64_t profile_steps_;
  std::optional<Replay> replay_;
  LayerProfile file_profile_;
  LayerTimes times_;
  std::vector<int> phase_;
  FillIn extra_;
  bool fallback_, trial_;
  InStepChoice fused_;  // the last in-step choice (its fused-bucket scores, for the plan)
  bool trial_pending_ = false;
  int64_t trial_start_ = -1, decisions_ = 0;
  double trial_layerwise_s_ = 0, trial_local_s_ = 0;
  double modelled_ = 0, bound_ = 0, localsgd_modelled_ = 0;
  bool local_sgd_ = false;  // Local SGD's schedule is run (fallback)
  bool observe_ = false;    // the default start (default_observe(); lockstep=1 turns it off)
  std::vector<int> default_phase_;  // plsgd's contiguous groups, run until switch_at_
  int64_t switch_at_ = -1;  // the first step of the solved plan (the default start); -1: not yet
  bool model_local_sgd_ = false;
};

}  // namespace dd::sync
