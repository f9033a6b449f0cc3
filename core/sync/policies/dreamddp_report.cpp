// What dreamddp tells (dreamddp.h): the plan rank 0 prints, the decisions metrics.h5 records (/decisions), and
// its checkpoint.
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/common/bytes.h"
#include "core/sync/policies/dreamddp.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

std::string DreamDdpPolicy::save_state() const {
  ByteWriter w;
  w.put_vec(times_.backward_s);
  w.put_vec(times_.comm_s);
  w.put<double>(times_.contention.compute);
  w.put<double>(times_.contention.comm);
  w.put<int8_t>(int8_t(trial_pending_));
  w.put<int64_t>(trial_start_);
  w.put<int8_t>(int8_t(local_sgd_));
  w.put<double>(trial_layerwise_s_);
  w.put<double>(trial_local_s_);
  w.put<int64_t>(decisions_);
  w.put<int64_t>(switch_at_);
  return w.bytes();
}

void DreamDdpPolicy::load_state(const std::string& s) {
  ByteReader r(s);
  LayerTimes t;
  t.backward_s = r.get_vec<double>();
  t.comm_s = r.get_vec<double>();
  if (!r.at_end()) {  // absent in checkpoints written before it was measured
    t.contention.compute = r.get<double>();
    t.contention.comm = r.get<double>();
  }
  // The schedule is a deterministic function of the agreed profile: re-solving gives the saved phases.
  if (!t.backward_s.empty()) on_profile(t);
  if (!r.at_end()) {  // the trial, as far as it went (its decision is measured: re-solving cannot give it)
    trial_pending_ = r.get<int8_t>() != 0;
    trial_start_ = r.get<int64_t>();
    local_sgd_ = r.get<int8_t>() != 0;
    trial_layerwise_s_ = r.get<double>();
    trial_local_s_ = r.get<double>();
    decisions_ = r.get<int64_t>();
  }
  if (!r.at_end()) switch_at_ = r.get<int64_t>();  // absent before the default start: -1, placed at the next step
}

// JSON (docs/design.md, HDF5 /decisions): the profile the schedule came from, the schedule, the trial.
std::string DreamDdpPolicy::decisions() const {
  using nlohmann::json;
  json j;
  j["policy"] = describe();
  j["first_step"] = first_step_;
  j["h"] = h_;
  j["delay"] = delay_;
  const bool self = replay_ ? replay_->self_profiled : profile_dir_.empty();
  json prof;
  prof["source"] = replay_ ? "replay" : self ? "self-profile" : "file";
  prof["self_profiled"] = self;
  if (self) prof["steps"] = observe_ ? observe_window() : profile_steps_;
  prof["observed"] = observe_;
  j["profile"] = prof;
  if (observe_) j["switch_at"] = switch_at_ >= 0 ? nlohmann::json(switch_at_) : nlohmann::json();
  if (phase_.empty()) {
    j["schedule"] = nullptr;
    return j.dump();
  }
  std::vector<std::string> names;
  for (auto& l : layers_) names.push_back(l.name);
  prof["layers"] = names;
  prof["backward_s"] = times_.backward_s;
  prof["comm_s"] = times_.comm_s;
  prof["contention"] = {{"compute", times_.contention.compute}, {"comm", times_.contention.comm}};
  j["profile"] = prof;
  const bool runs_local = local_at(std::numeric_limits<int64_t>::max());
  j["schedule"] = {{"phase", phase_}, {"fill", extra_}, {"model_local_sgd", local_sgd_model()},
                   {"runs", trial_pending_ ? "trial" : runs_local ? "localsgd" : "layer-wise"},
                   {"modelled_s", modelled_}, {"localsgd_modelled_s", localsgd_modelled_}};
  const bool tried = trial_pending_ || decisions_ > 0;
  if (tried) {
    json t = {{"start", trial_start_}, {"periods", kTrialPeriods}};
    if (!trial_pending_)
      t.update({{"verdict", local_sgd_ ? "localsgd" : "layer-wise"},
                {"layerwise_s_per_step", trial_layerwise_s_},
                {"localsgd_s_per_step", trial_local_s_}});
    j["trial"] = t;
  } else {
    j["trial"] = nullptr;
  }
  return j.dump();
}

std::string DreamDdpPolicy::plan() const {
  if (observe_ && phase_.empty()) return observe_plan();
  if (phase_.empty()) return "dreamddp: profiling backward and communication during the first " +
                             std::to_string(profile_steps_) + " steps" +
                             (first_step_ > 0 ? " from step " + std::to_string(first_step_) : std::string()) +
                             " (lock-step meanwhile)";
  std::ostringstream o;
  o.precision(4);
  o << "dreamddp: schedule for H=" << h_ << (delay_ ? ", delay=" + std::to_string(delay_) : std::string()) << " (modelled " << modelled_ * 1e3 << " ms/iter backward+comm, "
    << (fused_.fused_plsgd ? "the per-layer model's bound " : "bound ") << bound_ * 1e3 << " ms; ddp " << ddp_time(times_.backward_s, times_.comm_s) * 1e3 << " ms";
  if (!times_.contention.none())
    o << "; contention charged: compute x" << 1 + times_.contention.compute << ", communication x"
      << 1 + times_.contention.comm << " while they overlap";
  o << ")";
  if (fused_.fused_plsgd)
    o << "\n  runs plsgd's contiguous split: with fused buckets paying the fitted latency once each (alpha "
      << fused_.alpha_s * 1e3 << " ms per collective) it is modelled " << fused_.fused_plsgd_s * 1e3
      << " ms/iter against the solver's phases' " << fused_.fused_solved_s * 1e3
      << " (the solver charges every layer its own all-reduce)";
  if (trial_pending_)
    o << "\n  modelled within " << kTrialMargin * 100 << "% of Local SGD's schedule (" << localsgd_modelled_ * 1e3
      << " ms/iter) "
      << (contended(times_.contention) ? "where cores are shared"
          : observe_ ? "from times recorded in overlapped steps, which price Local SGD's blocking average too high"
                     : "on the fused-bucket model, a straight-line fit of the latency")
      << ": measuring both, 2 periods each, after one more period";
  else if (decisions_ > 0)
    o << "\n  measured: layer-wise " << trial_layerwise_s_ * 1e3 << " ms/step, Local SGD's schedule "
      << trial_local_s_ * 1e3 << " ms/step (2 periods each)";
  if (local_sgd_ && !trial_pending_)
    o << "\n  runs Local SGD's schedule (the whole model averaged, blocking, after every " << h_
      << "th update; modelled " << localsgd_modelled_ * 1e3 << " ms/iter)";
  o << (local_sgd_ && !trial_pending_ ? "\n  layer-wise schedule (not run):" : "\n  phase:");
  for (size_t l = 0; l < phase_.size(); ++l) o << " " << layers_[l].name << "=" << phase_[l];
  if (observe_)
    o << "\n  in force from " << (switch_at_ >= 0 ? "step " + std::to_string(switch_at_) : "the next period boundary")
      << " (plsgd's contiguous groups before it)";
  if (fillin_) {
    o << "\n  fill-in (extra averages fused into a phase's buckets):";
    bool any = false;
    for (size_t l = 0; l < extra_.size(); ++l) {
      if (extra_[l].empty()) continue;
      o << " " << layers_[l].name << "@";
      for (size_t i = 0; i < extra_[l].size(); ++i) o << (i ? "," : "") << extra_[l][i];
      any = true;
    }
    if (!any) o << " none (no neighbour of a phase's layers fits its idle channel)";
  }
  return o.str();
}

}  // namespace dd::sync
