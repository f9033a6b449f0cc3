// LayerSync's step (layer_sync.h). Every rank computes the same actions and the same bucket plan from
// rank-identical state and launches buckets in the same (reverse layer) order, so collectives always match.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/clock.h"
#include "core/sync/engine/layer_sync.h"
#include "core/sync/engine/step_plan.h"

namespace dd::sync {

LayerTable layer_table(const models::Model& m) {
  LayerTable t;
  t.meta = layer_metas(m.layers());
  for (auto* l : m.layers()) t.ranges.push_back({l->param_offset(), l->num_params(), l->buffer_offset(), l->num_buffers()});
  return t;
}

LayerSync::LayerSync(const EngineOptions& o, const LayerTable& layers, const Arenas& a, std::unique_ptr<DataPath> dp,
                     Backend& b)
    : dp_(std::move(dp)), o_(o), a_(a), b_(b), meta_(layers.meta), ranges_(layers.ranges),
      switches_(o.switches), control_file_(o.control_file, o.control_check), profile_(layers.size()),
      telemetry_(o.metrics, b.rank()), pm_(a.num_params, *a.device), coll_(*dp_, b, o.check_collectives, o.undo),
      copies_(coll_, a_, ranges_, pm_, auto_.codecs(), o.average_optimizer_state ? a.state_slots : 0) {
  const int L = num_layers();
  actions_.assign(L, Action::None);
  trigger_.assign(L, -1);
  stale_.assign(L, 0);
  ready_.assign(L, 0);
  lockstep_.assign(L, true);  // after the initial broadcast every layer is identical everywhere
  char host[256] = {0};
  if (o.host_name.empty()) gethostname(host, sizeof host - 1);
  hosts_ = b_.allgather(o.host_name.empty() ? std::string(host) : o.host_name);
  step_ = o.first_step;  // the policy is in force (and profiles) from here
  set_policy(o.policy);
  // Identical starting point everywhere (PyTorch DDP broadcasts at construction too), unless the caller made it so.
  if (!o.state_equal) {
    dp_->broadcast(b_, a_.params, size_t(a_.num_params), 0)->wait();
    if (a_.num_buffers) dp_->broadcast(b_, a_.buffers, size_t(a_.num_buffers), 0)->wait();
  }
  pm_.anchor(a_.params, 0, a_.num_params);  // set_policy made them from the parameters before they were equal
}

void LayerSync::begin_step(int64_t step) {
  step_ = step;
  t_bwd_ = now_s();  // blocking averages made here (switch, lock-step entry) are logged relative to this
  coll_.stats() = {};
  coll_.set_step(step);
  agreed_anomalies_ = 0;
  apply_agreed_votes();
  merge_delayed(/*all=*/false);
  apply_switches();
  policy_->on_step_begin(step);
  print_plan_if_changed();  // a plan placed at this step (dreamddp's solved plan from a boundary)
  time_periods(step);
  const bool lockstep_all = policy_->profiling(step) || step < fallback_until_;
  std::vector<bool> was_lockstep;
  if (pm_.active()) was_lockstep = lockstep_;
  const auto entering = decide_step(*policy_, step, lockstep_all, actions_, lockstep_, stale_);
  // A layer leaving lock-step is equal on all ranks now: its anchor for transformed averages.
  if (pm_.active())
    for (int l = 0; l < num_layers(); ++l)
      if (was_lockstep[size_t(l)] && !lockstep_[size_t(l)]) pm_.anchor(a_.params, ranges_[l].param_off, ranges_[l].param_n);
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
  if (any) average_layers(entering, /*optimizer_state=*/true, /*all_buffers=*/false, /*log=*/true);
}

void LayerSync::plan_launches() {
  buckets_ = plan_buckets(actions_, ranges_, o_.first_bucket_bytes, o_.bucket_cap_bytes);
  trigger_ = bucket_triggers(buckets_, num_layers());
  inflight_.clear();
  instep_.clear();
  launched_ = 0;
  // With delay=T this step's averages are merged T steps later: their layers are updated locally now.
  delayed_now_.assign(size_t(num_layers()), false);
  if (merge_.delay > 0)
    for (auto& bk : buckets_)
      if (averages_params(bk.action))
        for (int l = bk.lo; l <= bk.hi; ++l) delayed_now_[size_t(l)] = true;
}

StepStart LayerSync::begin(int64_t step) {
  begin_step(step);
  return {agreed_anomalies_, agreed_anomaly_step_};
}

void LayerSync::prepare_for_backward() { t_bwd_ = now_s(); }

void LayerSync::finalize_backward(LayerUpdates& u, bool immediate) {
  if (immediate) {
    finish_backward_and_update([&](int l) { u.update(l, lr_factor(l)); });
    return;
  }
  finish_backward();
  u.synced();
  for (int l = num_layers() - 1; l >= 0; --l) u.update(l, lr_factor(l));
}

StepCommStats LayerSync::end(const StepEnd& report) {
  if (report.anomaly) local_anomaly_ = true;  // rides in the votes cast by after_update
  after_update();
  return coll_.stats();
}

void LayerSync::on_layer_ready(int l) {
  // On a device the hook runs when the layer's kernels are queued: profiling steps wait for them to run.
  if (policy_->profiling(step_) || policy_->observing(step_)) dp_->wait_layer_ready(l);
  ready_[l] = now_s();
  // compress=auto needs the signals only while it measures; the policy's own, every step.
  if (signals_.on() && (wants_signals_ || auto_.measuring()))
    signals_.take(l, ranges_[l], a_.grads + ranges_[l].param_off, stale_[l]);
  const int bi = trigger_[l];
  if (bi < 0) return;
  // Buckets launch in plan order on every rank (the consistency rule): a model that reports its layers out of
  // order would make the ranks' collectives differ.
  if (bi != launched_)
    throw std::logic_error("sync: bucket " + std::to_string(bi) + " (layers " + std::to_string(buckets_[bi].lo) + ".." +
                           std::to_string(buckets_[bi].hi) + ") became ready before bucket " + std::to_string(launched_) +
                           ": the model reported its layers out of backward order");
  ++launched_;
  launch(buckets_[bi]);
}

void LayerSync::launch(const Bucket& bk) {
  if (delayed_now_[size_t(bk.lo)]) {
    copies_.defer(copies_.launch(group_of(bk), bk, step_, step_ + merge_.delay, t_bwd_, bk.lo));
    return;
  }
  if (pm_.active() && averages_params(bk.action)) {
    // A transformed in-step average: on copies, finished (outer step / anchor + delta) before the update.
    instep_.push_back(copies_.launch(group_of(bk), bk, step_, step_, t_bwd_, bk.lo));
    const CopyAverage& d = instep_.back();
    inflight_.push_back(InFlight{bk, d.works, d.launch_s, d.bytes, int(instep_.size()) - 1});
    return;
  }
  InFlight f{bk, {}, now_s()};
  for (auto& part : bucket_parts(bk, true, o_.average_optimizer_state ? a_.state_slots : 0, a_.num_params))
    f.works.push_back(coll_.average(group_of(bk), arena_ptr(a_, part), part.n, part.what, bk.lo));
  inflight_.push_back(std::move(f));
}

// Every planned bucket was launched before the wait: a model that forgot a notify would otherwise skip a bucket
// silently on this rank (and leave the others waiting in a collective it never joins).
void LayerSync::check_all_launched() const {
  if (launched_ == int(buckets_.size())) return;
  const Bucket& b = buckets_[size_t(launched_)];
  throw std::logic_error("sync: step " + std::to_string(step_) + ": bucket " + std::to_string(launched_) + " of " +
                         std::to_string(buckets_.size()) + " (layers " + std::to_string(b.lo) + ".." + std::to_string(b.hi) +
                         ") was never launched: the model's backward did not report layer " + std::to_string(b.lo) +
                         " to the hook");
}

void LayerSync::finish_backward() {
  check_all_launched();
  const double t0 = now_s();
  for (auto& f : inflight_)
    for (auto& w : f.works) w->wait();
  const double t1 = now_s();
  coll_.stats().exposed_ms += (t1 - t0) * 1e3;
  for (auto& f : inflight_)
    if (f.record >= 0) copies_.apply(instep_[size_t(f.record)], /*in_step=*/true);
  end_of_backward(t1);
}

void LayerSync::finish_backward_and_update(const std::function<void(int)>& update) {
  check_all_launched();
  for (int l = num_layers() - 1; l >= 0; --l)
    if (actions_[l] == Action::None || delayed_now_[size_t(l)]) update(l);
  double waited = 0;
  for (auto& f : inflight_) {
    const double t0 = now_s();
    for (auto& w : f.works) w->wait();
    waited += now_s() - t0;
    if (f.record >= 0) copies_.apply(instep_[size_t(f.record)], /*in_step=*/true);
    for (int l = f.bucket.hi; l >= f.bucket.lo; --l) update(l);
  }
  coll_.stats().exposed_ms += waited * 1e3;
  end_of_backward(now_s());
}

void LayerSync::end_of_backward(double t1) {
  record_timeline(t1);
  // The window's steps counted from the policy's first one (a switch into dreamddp profiles from there).
  const int64_t k = step_ - policy_->first_step();
  if (policy_->profiling(step_) || policy_->observing(step_)) profile_.add(k, ready_, t_bwd_);
  if (policy_->observing(step_) && k > 0) record_comm();
}

// The all-reduces of this step as the communication thread ran them, one after another in launch order: each
// from its launch or the previous one's end, whichever is later, to its own end.
void LayerSync::record_comm() {
  double prev = 0;
  for (auto& f : inflight_) {
    double end = 0;
    for (auto& w : f.works)
      if (w) end = std::max(end, w->end_time());
    if (end <= 0) continue;  // a backend that does not record it
    const double start = std::max(f.launch_s, prev);
    prev = end;
    if (f.record < 0 && end > start) profile_.add_comm(f.bytes >= 0 ? f.bytes : f.bucket.bytes(), end - start);
  }
}

float LayerSync::lr_factor(int l) const {
  return o_.staleness_gamma > 0 ? float(std::pow(o_.staleness_gamma, double(stale_[l]))) : 1.0f;
}

void LayerSync::after_update() {
  cast_votes();  // after the update: the trainer's anomaly report of this step rides along
  if (policy_->full_average_after(step_)) {
    const double t0 = now_s();
    if (merge_.delay > 0 || merge_.transforms()) periodic_average();
    else average_all(true, /*log=*/true);
    coll_.stats().exposed_ms += (now_s() - t0) * 1e3;
    std::fill(stale_.begin(), stale_.end(), 0);
  }
  const int64_t window = policy_->profile_window();
  if (window > 0 && step_ + 1 == policy_->first_step() + window) finish_profile();
  const int64_t seen = policy_->observe_window();
  if (seen > 0 && step_ + 1 == policy_->first_step() + seen) finish_observed();
}

std::vector<bool> LayerSync::local_layers() const {
  std::vector<bool> local(static_cast<size_t>(num_layers()));
  for (int l = 0; l < num_layers(); ++l) local[size_t(l)] = !lockstep_[size_t(l)];
  return local;
}

void LayerSync::record_timeline(double t_end) {
  telemetry_.layer_ready(step_, ready_, t_bwd_);
  for (auto& f : inflight_) log_sync_event(f, t_end, step_, t_bwd_);
}

void LayerSync::log_sync_event(const InFlight& f, double t_end, int64_t step, double t_bwd) {
  telemetry_.bucket(step, f.bucket, f.works, f.bytes, f.launch_s, t_end, t_bwd, 1 + group_);
}

std::unique_ptr<SyncSession> make_layer_sync(const EngineOptions& o, models::Model& m, optim::Optimizer& opt,
                                            Backend& b) {
  return std::make_unique<LayerSync>(o, layer_table(m), arenas_of(m, opt), std::make_unique<HostDataPath>(), b);
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
  return std::make_unique<LayerSync>(o, layers, a, std::move(dp), b);
}

}  // namespace dd::sync
