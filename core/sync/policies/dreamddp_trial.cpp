// dreamddp's measured trial (dreamddp.h): where the model cannot tell the layer-wise schedule from Local SGD's on
// shared cores, both run 2 periods each and the faster is kept; and replay=RUN_DIR, which takes a recorded run's
// decisions (its profile, schedule and the trial's verdict) instead of measuring them.
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/sync/policies/dreamddp.h"
#include "core/telemetry/metrics_import.h"

namespace dd::sync {

// A trial, where one may come, is measured from the second period boundary after the profile, over 4 periods;
// the period after it is not settled either (switching to Local SGD's schedule, it still waits for the last
// layer-wise period's averages).
int64_t DreamDdpPolicy::settled_after(int64_t from) const {
  if (observe_) from = std::max(from, switch_at_ >= 0 ? switch_at_ : switch_bound(first_step_ + observe_window()));
  const bool may_trial = phase_.empty() ? (replay_ ? replay_->trial : fallback_ && trial_ && delay_ == 0 && !merge_.transforms())
                                        : trial_pending_;
  return may_trial ? first_trial_step(from) + (kTrialPeriods + 1) * int64_t(h_) : from;
}

void DreamDdpPolicy::on_step_begin(int64_t step) {
  place_switch(step);
  // One whole period first: the first steps of a run (first collectives, first-touch memory) would weigh on the
  // trial's first window, and that window is the layer-wise one.
  if (trial_pending_ && trial_start_ < 0)
    trial_start_ = replay_ ? first_step_ + replay_->trial_offset : first_trial_step(step);
}

std::vector<int64_t> DreamDdpPolicy::timed_periods() const {
  if (!trial_pending_ || trial_start_ < 0) return {};
  std::vector<int64_t> s;
  for (int i = 0; i <= kTrialPeriods; ++i) s.push_back(trial_start_ + int64_t(i) * h_);
  return s;
}

void DreamDdpPolicy::on_period_times(int64_t, const std::vector<double>& s) {
  if (replay_) {  // the recorded verdict, whatever this run measured (or missed, resumed inside the trial)
    trial_layerwise_s_ = replay_->trial_layerwise_s;
    trial_local_s_ = replay_->trial_local_s;
    local_sgd_ = replay_->trial_local_sgd;
    trial_pending_ = false;
    ++decisions_;
    return;
  }
  // A boundary was missed (resumed inside the trial): measure again from the next period.
  if (s.size() != size_t(kTrialPeriods)) {
    trial_start_ = -1;
    return;
  }
  trial_layerwise_s_ = (s[0] + s[3]) / (2.0 * h_);
  trial_local_s_ = (s[1] + s[2]) / (2.0 * h_);
  local_sgd_ = trial_local_s_ < trial_layerwise_s_;
  trial_pending_ = false;
  ++decisions_;
}

void DreamDdpPolicy::load_replay() {
  const std::string path = replay_dir_ + "/metrics.h5";
  const std::string what = "--policy dreamddp: replay=" + replay_dir_ + ": ";
  nlohmann::json rec;
  int64_t first = -1;
  for (auto& [key, text] : telemetry::read_decisions(path)) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || j.value("policy", std::string()).rfind("dreamddp", 0) != 0) continue;
    const int64_t f = j.value("first_step", int64_t(0));
    if (first < 0 || f < first) first = f, rec = j;
  }
  if (first < 0) throw UsageError(what + path + " records no dreamddp decision (run with dreamddp first)");
  try {
    if (rec.at("h").get<int>() != h_)
      throw UsageError(what + "the recorded run had h=" + std::to_string(rec.at("h").get<int>()) + ", this one h=" +
                       std::to_string(h_));
    if (rec.at("schedule").is_null())
      throw UsageError(what + "the recorded run ended before its schedule was decided");
    Replay r;
    const auto& p = rec.at("profile");
    r.self_profiled = p.at("self_profiled").get<bool>();
    if (r.self_profiled) profile_steps_ = p.at("steps").get<int64_t>();
    r.observed = p.value("observed", false);
    r.names = p.at("layers").get<std::vector<std::string>>();
    r.times.backward_s = p.at("backward_s").get<std::vector<double>>();
    r.times.comm_s = p.at("comm_s").get<std::vector<double>>();
    r.times.contention.compute = p.at("contention").at("compute").get<double>();
    r.times.contention.comm = p.at("contention").at("comm").get<double>();
    const auto& sc = rec.at("schedule");
    r.phase = sc.at("phase").get<std::vector<int>>();
    r.fill = sc.at("fill").get<FillIn>();
    r.model_local_sgd = sc.at("model_local_sgd").get<bool>();
    if (r.phase.size() != r.names.size() || r.fill.size() != r.names.size())
      throw UsageError(what + "the recorded schedule does not cover its layers");
    for (int q : r.phase)
      if (q < 0 || q >= h_) throw UsageError(what + "the recorded schedule has a phase outside [0, h)");
    const auto& t = rec.at("trial");
    if (!t.is_null()) {
      if (!t.contains("verdict"))
        throw UsageError(what + "the recorded run ended inside its trial (no verdict to replay)");
      r.trial = true;
      r.trial_offset = t.at("start").get<int64_t>() - first;
      r.trial_local_sgd = t.at("verdict").get<std::string>() == "localsgd";
      r.trial_layerwise_s = t.at("layerwise_s_per_step").get<double>();
      r.trial_local_s = t.at("localsgd_s_per_step").get<double>();
    }
    replay_ = r;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(what + "its dreamddp decision is incomplete (" + e.what() + ")");
  }
}

}  // namespace dd::sync
