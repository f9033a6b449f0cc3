// LayerSync's policy in force (layer_sync.h): building it and what depends on it (merge keys, signals, the
// control vector's layout, hier's sub-group), switching at --switch steps or on a control-file request, the anomaly
// fallback to lock-step, and handing dreamddp its agreed profile.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "core/sync/engine/layer_sync.h"
#include "core/telemetry/metrics_writer.h"

namespace dd::sync {

void LayerSync::set_policy(const PolicySpec& parsed) {
  ++generation_;  // votes cast under an earlier policy are not handed to this one
  policy_ = make_policy(parsed);
  const std::string& spec = parsed.text;
  policy_spec_ = spec;
  policy_->setup(meta_, b_.size());
  // In force from this step (the constructor's 0, a switch's step; a resume restores the saved one): its
  // profiling window starts here, with a profile of its own.
  policy_->start_at(step_);
  caps_ = policy_->caps();
  wants_signals_ = caps_.voting && caps_.voting->wants_signals();
  profile_ = SelfProfile(num_layers(), o_.bucket_cap_bytes);
  plan_version_ = policy_plan_version();
  const int L = num_layers();
  merge_ = policy_->merge();
  // With a delay the data channel carries averages across steps, and the control all-reduce, waited for one or two
  // steps later, would queue behind them (10-20 ms exposed two steps after each 4 MB launch on the 1 Gbit/s mlp
  // with delay=4). It gets a channel of its own (collective: every rank sets a policy at the same step).
  if (merge_.delay > 0 && !control_ && b_.size() > 1) control_ = b_.split(0);
  if (merge_.compress != Codec::None && !b_.has_byte_channel())
    throw UsageError("--policy " + spec + ": compress= needs the byte channel of gloo or mpi, not nccl");
  pm_.configure(merge_, a_.params, !dp_->moves_data());
  signals_.configure(wants_signals_ || merge_.compress_auto, L, a_.num_params, !dp_->moves_data(), *a_.device);
  auto_.reset(merge_, L, step_);
  // Control vector: the policy's votes, then [control-file switch request, anomaly flag] when those are on, then
  // compress=auto's per-layer cosines.
  policy_votes_ = size_t(L) * size_t(caps_.voting ? caps_.voting->votes_per_layer() : 0);
  layout_ = {policy_votes_, control_file_.on(), o_.anomaly_votes, auto_.votes()};
  votes_.resize(layout_.size());
  // When the control vector carries only the anomaly flag, nothing decides from it in the next step: it is applied
  // two steps late, so its all-reduce hides behind a whole step instead of making every step wait for the slowest
  // rank (a per-step rendezvous that cost 2-3 ms a step on the emulated 1 Gbit/s cluster). Policy votes and
  // control-file requests keep the one-step lag of docs/design.md.
  vote_lag_ = (policy_votes_ == 0 && !control_file_.on()) ? 2 : 1;
  auto groups = caps_.grouped ? caps_.grouped->groups(hosts_) : std::vector<int>{};
  if (!groups.empty()) {
    if (int(groups.size()) != b_.size()) throw UsageError("--policy " + spec + ": topology does not cover the ranks");
    group_ = groups[b_.rank()];
    intra_ = b_.split(group_);  // collective: every rank switches policy at the same step
  } else {
    intra_.reset();
    group_ = 0;
  }
  take_carried_profile();
  if (o_.verbose && b_.rank() == 0) {
    std::string plan = policy_plan();
    std::fprintf(stderr, "sync: policy %s on %d ranks, %d layers%s%s\n", policy_->describe().c_str(), b_.size(),
                 num_layers(), plan.empty() ? "" : "\n", plan.c_str());
  }
  record_decisions();
}

// A layer that changes regime is first averaged once: averaging everything local is that, in one go. Every layer
// is then equal on all ranks: the anchors of transformed averages restart from there.
void LayerSync::switch_policy(const PolicySpec& spec, const std::string& why) {
  merge_delayed(/*all=*/true);
  average_all(false, /*log=*/true);
  set_policy(spec);
  pm_.anchor(a_.params, 0, a_.num_params);
  changes_.push_back({step_, spec.text, why.empty() ? "--switch" : "control file"});
  if (o_.metrics) o_.metrics->append_event(step_, "switch", spec.text + why);
}

void LayerSync::apply_switches() {
  while (next_switch_ < switches_.size() && switches_[next_switch_].step <= step_) {
    switch_policy(switches_[next_switch_].spec, "");
    ++next_switch_;
  }
}

void LayerSync::fallback(int64_t steps) {
  // Called by every rank at the same step (after agreed_anomalies()): average once — parameters, buffers and, since
  // the layers enter lock-step, optimizer state — then lock-step.
  merge_delayed(/*all=*/true);
  average_layers(local_layers(), /*optimizer_state=*/true, /*all_buffers=*/true, /*log=*/true);
  std::fill(stale_.begin(), stale_.end(), 0);
  fallback_until_ = step_ + 1 + steps;
  // This step's plan was made before the fallback: it becomes lock-step too.
  std::fill(actions_.begin(), actions_.end(), Action::AllreduceGrads);
  std::fill(lockstep_.begin(), lockstep_.end(), true);
  plan_launches();
  if (o_.metrics) o_.metrics->append_event(step_, "fallback", "lock-step until step " + std::to_string(fallback_until_));
}

void LayerSync::print_plan_if_changed() {
  if (policy_plan_version() == plan_version_) return;
  plan_version_ = policy_plan_version();
  if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "%s\n", policy_plan().c_str());
  record_decisions();
}

// Keyed by the policy's first step: a run that switches into dreamddp twice keeps both records.
void LayerSync::record_decisions() {
  if (!o_.metrics || !caps_.reporting) return;
  const std::string d = caps_.reporting->decisions();
  if (d.empty()) return;
  auto j = nlohmann::json::parse(d);
  j["decided_at"] = step_;
  o_.metrics->set_decision("policy@" + std::to_string(policy_->first_step()), j.dump());
}

// Measured trials (Trialled::timed_periods): every rank crosses the same boundaries at the same steps, so the one
// agreement at the last boundary is a collective like any other.
void LayerSync::time_periods(int64_t step) {
  if (!caps_.trialled) return;
  const auto marks = caps_.trialled->timed_periods();
  if (marks.size() < 2) return;
  if (marks != period_steps_) period_steps_ = marks, period_t_.assign(marks.size(), 0.0);
  for (size_t i = 0; i < marks.size(); ++i)
    if (marks[i] == step) period_t_[i] = now_s();
  if (step != marks.back()) return;
  const size_t n = marks.size() - 1;
  std::vector<float> v(n + 1, 0.0f);  // the windows' seconds, then "this rank missed a boundary"
  for (size_t i = 0; i < n; ++i) {
    if (period_t_[i] <= 0 || period_t_[i + 1] <= 0) v[n] = 1.0f;
    v[i] = float(period_t_[i + 1] - period_t_[i]);
  }
  agree_floats(*dp_, b_, v, ReduceOp::Sum);
  std::vector<double> seconds;
  if (v[n] == 0.0f)
    for (size_t i = 0; i < n; ++i) seconds.push_back(double(v[i]) / b_.size());
  period_steps_.clear();
  caps_.trialled->on_period_times(step, seconds);
  print_plan_if_changed();
}

// Self-profiling (dreamddp): the agreed profile of the lock-step steps hands the policy its schedule.
void LayerSync::finish_profile() {
  publish_profile(profile_.finish(*dp_, b_, meta_, o_.contention_given ? &o_.contention : nullptr));
  print_plan_if_changed();
}

// The same from ordinary steps (Profiled::observe_steps): the comm model fitted to the recorded all-reduces, no
// probe; agreed over the ranks with one small collective between two steps.
void LayerSync::finish_observed() {
  publish_profile(profile_.finish_observed(*dp_, b_, meta_, o_.contention_given ? &o_.contention : nullptr));
  print_plan_if_changed();
}

// A profile the policy schedules from: handed to it, and kept for the caller (EngineOptions::profile_out) so that
// an engine built after a change of world size can start from it.
void LayerSync::publish_profile(const LayerTimes& t) {
  if (o_.profile_out) o_.profile_out->times = t, o_.profile_out->world = b_.size();
  caps_.profiled->on_profile(t);
}

// The first policy of an engine built after a change of world size (EngineOptions::profile_in): a profiling policy
// gets the carried profile, scaled to this world, instead of profiling again. Once per engine; a later switch
// profiles as usual.
void LayerSync::take_carried_profile() {
  const ProfileCarry* in = o_.profile_in;
  o_.profile_in = nullptr;
  if (!in || !in->has() || !caps_.profiled || b_.size() < 2) return;
  if (policy_->profile_window() <= 0 && policy_->observe_window() <= 0) return;
  if (in->times.backward_s.size() != size_t(num_layers())) return;
  const LayerTimes t = scale_profile(in->times, meta_, in->world, b_.size());
  if (o_.verbose && b_.rank() == 0)
    std::fprintf(stderr, "sync: the profile of %d ranks scaled to %d (backward times as measured, all-reduces as a "
                 "ring of %d): no profiling steps\n", in->world, b_.size(), b_.size());
  publish_profile(t);
}

}  // namespace dd::sync
