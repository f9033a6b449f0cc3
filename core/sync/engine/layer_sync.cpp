// LayerSync's step (layer_sync.h): its begin, the hook's launches and its end (the wait and the updates are in
// layer_sync_updates.cpp). Every rank computes the same actions and the same bucket plan from
// rank-identical state and launches buckets in the same (reverse layer) order, so collectives always match.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "base/clock.h"
#include "core/sync/engine/layer_sync.h"
#include "core/sync/engine/step_plan.h"
#include "core/sync/policy/closing_period.h"

namespace dd::sync {

LayerTable layer_table(const models::Model& m) {
  LayerTable t;
  t.meta = layer_metas(m.layers());
  for (auto* l : m.layers()) t.ranges.push_back({l->param_offset(), l->num_params(), l->buffer_offset(), l->num_buffers()});
  return t;
}

LayerSync::LayerSync(const EngineOptions& o, const LayerTable& layers, const Arenas& a, std::unique_ptr<DataPath> dp,
                     Backend& b)
    : dp_(std::move(dp)), o_(o), a_(a), b_(b), layers_(layers), policy_(o.switches), plan_(layers.size()),
      launches_(layers.size()), votes_(o.control_file, o.control_check, o.anomaly_votes), profile_(layers.size()),
      telemetry_(o.metrics, b.rank()), pm_(a.num_params, *a.device), coll_(*dp_, b, o.check_collectives, o.undo),
      copies_(coll_, a_, layers_.ranges, pm_, auto_.codecs(), o.average_optimizer_state ? a.state_slots : 0) {
  // Every layer starts lock-step (LayerPlan): after the initial broadcast every layer is identical everywhere.
  char host[256] = {0};
  if (o.host_name.empty()) gethostname(host, sizeof host - 1);
  policy_.hosts = b_.allgather(o.host_name.empty() ? std::string(host) : o.host_name);
  step_ = o.first_step;  // the policy is in force (and profiles) from here
  set_policy(o.policy);
  // Identical starting point everywhere (PyTorch DDP broadcasts at construction too), unless the caller made it so
  // or the hashes show it already is (ranks built from one seed; as torchft's init_sync=False, but checked).
  if (!o.state_equal && !start_equal_everywhere()) {
    dp_->broadcast(b_, a_.params, size_t(a_.num_params), 0)->wait();
    if (a_.num_buffers) dp_->broadcast(b_, a_.buffers, size_t(a_.num_buffers), 0)->wait();
  }
  pm_.anchor(a_.params, 0, a_.num_params);  // set_policy made them from the parameters before they were equal
}

void LayerSync::begin_step(int64_t step) {
  step_ = step;
  launches_.cursor = UpdateCursor{};  // a step that threw while its updates were handed out leaves it open
  launches_.t_bwd = now_s();  // blocking averages made here (switch, lock-step entry) are logged relative to this
  coll_.stats() = {};
  coll_.set_step(step);
  votes_.agreed_anomalies = 0;
  apply_agreed_votes();
  merge_delayed(/*all=*/false);
  apply_switches();
  policy_.policy->on_step_begin(step);
  print_plan_if_changed();  // a plan placed at this step (dreamddp's solved plan from a boundary)
  time_periods(step);
  const bool lockstep_all = policy_.policy->profiling(step) || step < plan_.fallback_until;
  std::vector<bool> was_lockstep;
  if (pm_.active()) was_lockstep = plan_.lockstep;
  const auto entering =
      decide_step(*policy_.policy, step, lockstep_all, !lockstep_all && closing_at(step), plan_.actions, plan_.lockstep,
                  plan_.stale);
  // A layer leaving lock-step is equal on all ranks now: its anchor for transformed averages.
  if (pm_.active())
    for (int l = 0; l < num_layers(); ++l)
      if (was_lockstep[size_t(l)] && !plan_.lockstep[size_t(l)])
        pm_.anchor(a_.params, layers_.ranges[l].param_off, layers_.ranges[l].param_n);
  // A pending correction applied after a layer became lock-step would make the ranks differ again.
  if (std::find(entering.begin(), entering.end(), true) != entering.end()) merge_delayed(/*all=*/true);
  enter_lockstep(entering);
  plan_launches();
}

// Lock-step means identical parameters AND optimizer state on every rank (the same averaged gradient then keeps
// them identical). A layer entering lock-step from a local regime (a switch, a fallback, a policy that changes its
// mind) is therefore first averaged once, parameters, buffers and optimizer state. All ranks see the same
// transitions, so this blocking average is a collective like any other.
void LayerSync::enter_lockstep(const std::vector<bool>& entering) {
  bool any = false;
  for (bool e : entering) any |= e;
  if (any) average_layers(entering, /*optimizer_state=*/true, BufferAverage::PerLayer, /*log=*/true);
}

// The last period's averages are left to the closing average (closing_period.h), except in steps observed for a
// profile (their averages are what it measures).
bool LayerSync::in_closing_period(int64_t step) const {
  const int64_t c = closing_period_start(*policy_.policy, o_.last_step);
  return c >= 0 && step >= c && !policy_.policy->observing(step);
}

// in_closing_period, with the line that says so at the period's first step.
bool LayerSync::closing_at(int64_t step) const {
  if (!in_closing_period(step)) return false;
  const int64_t c = closing_period_start(*policy_.policy, o_.last_step);
  if (o_.verbose && b_.rank() == 0 && (step == c || step == o_.first_step)) {
    const MergeSpec& m = policy_.merge;
    const char* closing = m.nesterov                 ? "one outer step of every layer after the last step syncs them"
                          : m.compress != Codec::None ? "one compressed average of every layer after the last step "
                                                        "syncs them"
                                                      : "the closing average syncs them";
    std::fprintf(stderr, "sync: steps %lld-%lld, the last period: its layers stay local and %s\n", (long long)step,
                 (long long)o_.last_step, closing);
  }
  return true;
}

void LayerSync::plan_launches() {
  launches_.plan(plan_.actions, layers_.ranges, o_.first_bucket_bytes, o_.bucket_cap_bytes);
  plan_.mark_delayed(launches_.buckets, policy_.merge.delay);
}

StepStart LayerSync::begin(int64_t step) {
  begin_step(step);
  return {votes_.agreed_anomalies, votes_.agreed_anomaly_step};
}

void LayerSync::prepare_for_backward() { launches_.t_bwd = now_s(); }

StepCommStats LayerSync::end(const StepEnd& report) {
  if (launches_.cursor.open)
    throw std::logic_error("sync: step " + std::to_string(step_) + " ended before every layer finalize_backward "
                           "handed out was taken");
  if (report.anomaly) votes_.local_anomaly = true;  // rides in the votes cast by after_update
  after_update();
  return coll_.stats();
}

void LayerSync::on_layer_ready(int l) {
  // On a device the hook runs when the layer's kernels are queued: profiling steps wait for them to run.
  if (policy_.policy->profiling(step_) || policy_.policy->observing(step_)) dp_->wait_layer_ready(l);
  launches_.ready[l] = now_s();
  // compress=auto needs the signals only while it measures; the policy's own, every step.
  if (votes_.signals.on() && (policy_.wants_signals || auto_.measuring()))
    votes_.signals.take(l, layers_.ranges[l], a_.grads + layers_.ranges[l].param_off, plan_.stale[l]);
  const int bi = launches_.take(l);
  if (bi >= 0) launch(launches_.buckets[size_t(bi)]);
}

void LayerSync::launch(const Bucket& bk) {
  if (plan_.delayed_now[size_t(bk.lo)]) {
    Backend& g = policy_.group_of(bk, b_);
    copies_.defer(copies_.launch(g, bk, step_, step_ + policy_.merge.delay, launches_.t_bwd, bk.lo));
    return;
  }
  if (pm_.active() && averages_params(bk.action)) {
    // A transformed in-step average: on copies, finished (outer step / anchor + delta) before the update.
    launches_.instep.push_back(copies_.launch(policy_.group_of(bk, b_), bk, step_, step_, launches_.t_bwd, bk.lo));
    const CopyAverage& d = launches_.instep.back();
    launches_.inflight.push_back(InFlight{bk, d.works, d.launch_s, d.bytes, int(launches_.instep.size()) - 1});
    return;
  }
  InFlight f{bk, {}, now_s()};
  for (auto& part : bucket_parts(bk, true, o_.average_optimizer_state ? a_.state_slots : 0, a_.num_params))
    f.works.push_back(coll_.average(policy_.group_of(bk, b_), arena_ptr(a_, part), part.n, part.what, bk.lo));
  launches_.inflight.push_back(std::move(f));
}

void LayerSync::end_of_backward(double t1) {
  record_timeline(t1);
  // The window's steps counted from the policy's first one (a switch into dreamddp profiles from there).
  const int64_t k = step_ - policy_.policy->first_step();
  if (policy_.policy->profiling(step_) || policy_.policy->observing(step_))
    profile_.add(k, launches_.ready, launches_.t_bwd);
  if (policy_.policy->observing(step_) && k > 0) launches_.record_comm(profile_);
}

float LayerSync::lr_factor(int l) const { return plan_.lr_factor(l, o_.staleness_gamma); }

void LayerSync::after_update() {
  cast_votes();  // after the update: the trainer's anomaly report of this step rides along
  if (policy_.policy->full_average_after(step_)) {
    const double t0 = now_s();
    if (policy_.merge.delay > 0 || policy_.merge.transforms()) periodic_average();
    else average_all(true, /*log=*/true);
    coll_.stats().exposed_ms += (now_s() - t0) * 1e3;
    std::fill(plan_.stale.begin(), plan_.stale.end(), 0);
  }
  const int64_t window = policy_.policy->profile_window();
  if (window > 0 && step_ + 1 == policy_.policy->first_step() + window) finish_profile();
  const int64_t seen = policy_.policy->observe_window();
  if (seen > 0 && step_ + 1 == policy_.policy->first_step() + seen) finish_observed();
}

void LayerSync::record_timeline(double t_end) {
  telemetry_.layer_ready(step_, launches_.ready, launches_.t_bwd);
  for (auto& f : launches_.inflight) log_sync_event(f, t_end, step_, launches_.t_bwd);
}

void LayerSync::log_sync_event(const InFlight& f, double t_end, int64_t step, double t_bwd) {
  telemetry_.bucket(step, f.bucket, f.works, f.bytes, f.launch_s, t_end, t_bwd, 1 + policy_.group);
}

std::unique_ptr<SyncSession> make_layer_sync(const EngineOptions& o, models::Model& m, optim::Optimizer& opt,
                                            Backend& b) {
  return std::make_unique<SyncSession>(
      std::make_unique<LayerSync>(o, layer_table(m), arenas_of(m, opt), std::make_unique<HostDataPath>(), b));
}

Arenas arenas_of(models::Model& m, optim::Optimizer& opt) {
  Arenas a;
  a.params = m.params().data();
  a.grads = m.grads().data();
  a.buffers = m.buffers().data();
  a.opt_state = opt.state().data();
  a.num_params = int64_t(m.params().size());
  a.num_buffers = int64_t(m.buffers().size());
  a.state_slots = opt.state_slots();
  a.device = &m.device();
  return a;
}

std::unique_ptr<SyncSession> make_layer_sync(const EngineOptions& o, const LayerTable& layers, const Arenas& a,
                                            std::unique_ptr<DataPath> dp, Backend& b) {
  return std::make_unique<SyncSession>(std::make_unique<LayerSync>(o, layers, a, std::move(dp), b));
}

}  // namespace dd::sync
