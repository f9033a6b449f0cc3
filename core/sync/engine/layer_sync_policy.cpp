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
  ++policy_.generation;  // votes cast under an earlier policy are not handed to this one
  policy_.policy = make_policy(parsed);
  const std::string& spec = parsed.text;
  policy_.spec = spec;
  policy_.policy->setup(layers_.meta, b_.size());
  // In force from this step (the constructor's 0, a switch's step; a resume restores the saved one): its
  // profiling window starts here, with a profile of its own.
  policy_.policy->start_at(step_);
  policy_.caps = policy_.policy->caps();
  policy_.wants_signals = policy_.caps.voting && policy_.caps.voting->wants_signals();
  profile_ = SelfProfile(num_layers(), o_.bucket_cap_bytes);
  policy_.plan_version = policy_.reported_version();
  const int L = num_layers();
  policy_.merge = policy_.policy->merge();
  // With a delay the data channel carries averages across steps, and the control all-reduce, waited for one or two
  // steps later, would queue behind them (10-20 ms exposed two steps after each 4 MB launch on the 1 Gbit/s mlp
  // with delay=4). It gets a channel of its own (collective: every rank sets a policy at the same step).
  if (policy_.merge.delay > 0 && !votes_.channel && b_.size() > 1) votes_.channel = b_.split(0);
  if (policy_.merge.compress != Codec::None && !b_.has_byte_channel())
    throw UsageError("--policy " + spec + ": compress= needs the byte channel of gloo or mpi, not nccl");
  pm_.configure(policy_.merge, a_.params, !dp_->moves_data());
  votes_.signals.configure(policy_.wants_signals || policy_.merge.compress_auto, L, a_.num_params, !dp_->moves_data(),
                           *a_.device);
  auto_.reset(policy_.merge, L, step_);
  // Control vector (VoteBox::configure): the policy's votes, the flags that are on, compress=auto's cosines.
  votes_.configure(size_t(L) * size_t(policy_.caps.voting ? policy_.caps.voting->votes_per_layer() : 0), auto_.votes());
  auto groups = policy_.caps.grouped ? policy_.caps.grouped->groups(policy_.hosts) : std::vector<int>{};
  if (!groups.empty()) {
    if (int(groups.size()) != b_.size()) throw UsageError("--policy " + spec + ": topology does not cover the ranks");
    policy_.group = groups[b_.rank()];
    policy_.intra = b_.split(policy_.group);  // collective: every rank switches policy at the same step
  } else {
    policy_.intra.reset();
    policy_.group = 0;
  }
  take_carried_profile();
  if (o_.verbose && b_.rank() == 0) {
    std::string plan = policy_.plan();
    std::fprintf(stderr, "sync: policy %s on %d ranks, %d layers%s%s\n", policy_.policy->describe().c_str(), b_.size(),
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
  policy_.changes.push_back({step_, spec.text, why.empty() ? "--switch" : "control file"});
  if (o_.metrics) o_.metrics->append_event(step_, "switch", spec.text + why);
}

void LayerSync::apply_switches() {
  while (policy_.next_switch < policy_.switches.size() && policy_.switches[policy_.next_switch].step <= step_) {
    switch_policy(policy_.switches[policy_.next_switch].spec, "");
    ++policy_.next_switch;
  }
}

void LayerSync::fallback(int64_t steps) {
  // Called by every rank at the same step (after agreed_anomalies()): average once — parameters, buffers and, since
  // the layers enter lock-step, optimizer state — then lock-step.
  merge_delayed(/*all=*/true);
  average_layers(plan_.local_layers(), /*optimizer_state=*/true, BufferAverage::All, /*log=*/true);
  // This step's plan was made before the fallback: it becomes lock-step too.
  plan_.fall_back(step_ + 1 + steps);
  plan_launches();
  if (o_.metrics)
    o_.metrics->append_event(step_, "fallback", "lock-step until step " + std::to_string(plan_.fallback_until));
}

void LayerSync::print_plan_if_changed() {
  if (policy_.reported_version() == policy_.plan_version) return;
  policy_.plan_version = policy_.reported_version();
  if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "%s\n", policy_.plan().c_str());
  record_decisions();
}

// Keyed by the policy's first step: a run that switches into dreamddp twice keeps both records.
void LayerSync::record_decisions() {
  if (!o_.metrics || !policy_.caps.reporting) return;
  const std::string d = policy_.caps.reporting->decisions();
  if (d.empty()) return;
  auto j = nlohmann::json::parse(d);
  j["decided_at"] = step_;
  o_.metrics->set_decision("policy@" + std::to_string(policy_.policy->first_step()), j.dump());
}

// Measured trials (Trialled::timed_periods): every rank crosses the same boundaries at the same steps, so the one
// agreement at the last boundary is a collective like any other.
void LayerSync::time_periods(int64_t step) {
  if (!policy_.caps.trialled) return;
  const auto marks = policy_.caps.trialled->timed_periods();
  if (marks.size() < 2) return;
  if (marks != policy_.period_steps) policy_.period_steps = marks, policy_.period_t.assign(marks.size(), 0.0);
  for (size_t i = 0; i < marks.size(); ++i)
    if (marks[i] == step) policy_.period_t[i] = now_s();
  if (step != marks.back()) return;
  const size_t n = marks.size() - 1;
  std::vector<float> v(n + 1, 0.0f);  // the windows' seconds, then "this rank missed a boundary"
  for (size_t i = 0; i < n; ++i) {
    if (policy_.period_t[i] <= 0 || policy_.period_t[i + 1] <= 0) v[n] = 1.0f;
    v[i] = float(policy_.period_t[i + 1] - policy_.period_t[i]);
  }
  agree_floats(*dp_, b_, v, ReduceOp::Sum);
  std::vector<double> seconds;
  if (v[n] == 0.0f)
    for (size_t i = 0; i < n; ++i) seconds.push_back(double(v[i]) / b_.size());
  policy_.period_steps.clear();
  policy_.caps.trialled->on_period_times(step, seconds);
  print_plan_if_changed();
}

// Self-profiling (dreamddp): the agreed profile of the lock-step steps hands the policy its schedule.
void LayerSync::finish_profile() {
  publish_profile(profile_.finish(*dp_, b_, layers_.meta, o_.contention_given ? &o_.contention : nullptr));
  print_plan_if_changed();
}

// The same from ordinary steps (Profiled::observe_steps): the comm model fitted to the recorded all-reduces, no
// probe; agreed over the ranks with one small collective between two steps.
void LayerSync::finish_observed() {
  publish_profile(profile_.finish_observed(*dp_, b_, layers_.meta, o_.contention_given ? &o_.contention : nullptr));
  print_plan_if_changed();
}

// A profile the policy schedules from: handed to it, and kept for the caller (EngineOptions::profile_out) so that
// an engine built after a change of world size can start from it.
void LayerSync::publish_profile(const LayerTimes& t) {
  if (o_.profile_out) o_.profile_out->times = t, o_.profile_out->world = b_.size();
  policy_.caps.profiled->on_profile(t);
}

// The first policy of an engine built after a change of world size (EngineOptions::profile_in): a profiling policy
// gets the carried profile, scaled to this world, instead of profiling again. Once per engine; a later switch
// profiles as usual.
void LayerSync::take_carried_profile() {
  const ProfileCarry* in = o_.profile_in;
  o_.profile_in = nullptr;
  if (!in || !in->has() || !policy_.caps.profiled || b_.size() < 2) return;
  if (policy_.policy->profile_window() <= 0 && policy_.policy->observe_window() <= 0) return;
  if (in->times.backward_s.size() != size_t(num_layers())) return;
  const LayerTimes t = scale_profile(in->times, layers_.meta, in->world, b_.size());
  if (o_.verbose && b_.rank() == 0)
    std::fprintf(stderr, "sync: the profile of %d ranks scaled to %d (backward times as measured, all-reduces as a "
                 "ring of %d): no profiling steps\n", in->world, b_.size(), b_.size());
  publish_profile(t);
}

}  // namespace dd::sync
