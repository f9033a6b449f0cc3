// dreamddp's default start (dreamddp.h): no lock-step window, and a trial only where the model cannot tell the
// solved plan from Local SGD's schedule. From its first step it runs plsgd's contiguous groups of about equal bytes
// while the engine records, from those ordinary steps, every layer's ready
// time and every bucket's all-reduce (its bytes and its time on the communication thread); after observe_window()
// steps the engine agrees one profile over the ranks (a few floats, rank 0's everywhere) and hands it to
// on_profile, which solves the schedule between two steps. The solved plan is in force from the first period
// boundary after that step: a function of the step alone, so every rank switches at the same step.
//
// Contention is not probed on this path: the records come from steps that overlap the all-reduces with backward,
// so both the backward times and the all-reduce times already carry what the two cost each other; charging a
// probed contention on top would count it twice (a given --contention is still charged). The same records price
// Local SGD's blocking average, which overlaps nothing, at the overlapped cost too: where the model puts the two
// within a tenth of each other, both are measured (dreamddp_trial.cpp) and the faster runs.
#include <algorithm>
#include <sstream>

#include "core/sync/policies/dreamddp.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

void DreamDdpPolicy::setup_default_plan() {
  std::vector<double> bytes;
  for (auto& l : layers_) bytes.push_back(double(l.bytes));
  default_phase_ = contiguous_groups(bytes, h_);
}

// The first period boundary at or after `from`.
int64_t DreamDdpPolicy::switch_bound(int64_t from) const { return (from + h_ - 1) / h_ * h_; }

// The solved plan's first step, fixed at the first step begun after the profile arrived (the same step on every
// rank: the profile is agreed at one step, or carried into the engine's first).
void DreamDdpPolicy::place_switch(int64_t step) {
  if (observe_ && !phase_.empty() && switch_at_ < 0) switch_at_ = switch_bound(step);
}

std::string DreamDdpPolicy::observe_plan() const {
  std::ostringstream o;
  o << "dreamddp: profiling backward and communication from the first " << observe_window() << " steps"
    << (first_step_ > 0 ? " from step " + std::to_string(first_step_) : std::string())
    << ", which run plsgd's " << h_ << " contiguous groups (no lock-step); the solved schedule from the next period "
    << "boundary after them\n  phase:";
  for (size_t l = 0; l < default_phase_.size(); ++l) o << " " << layers_[l].name << "=" << default_phase_[l];
  return o.str();
}

}  // namespace dd::sync
