// LayerSync implementation. Every rank computes the same actions and the same bucket plan from rank-identical
// state and launches buckets in the same (reverse layer) order, so collectives always match across ranks.
#include "core/sync/layer_sync.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "backends/backend.h"
#include "core/common/bytes.h"
#include "core/common/clock.h"
#include "core/common/error.h"
#include "core/sync/bucket_plan.h"
#include "core/sync/codec.h"
#include "core/sync/collectives.h"
#include "core/sync/copy_average.h"
#include "core/sync/control_votes.h"
#include "core/sync/param_merge.h"
#include "core/sync/data_path.h"
#include "core/sync/policy.h"
#include "core/sync/self_profile.h"
#include "core/sync/step_plan.h"
#include "core/sync/sync_telemetry.h"
#include "core/telemetry/metrics_writer.h"

namespace dd::sync {
namespace {

struct InFlight {
  Bucket bucket;
  std::vector<WorkPtr> works;
  double launch_s;
  int64_t bytes = -1;  // bytes this rank contributed when not bucket.bytes() (a compressed payload)
  int record = -1;     // index into LayerSync::instep_ of a transformed average to finish when the works end
};

class LayerSync : public SyncEngine {

 public:
  LayerSync(const EngineOptions& o, models::Model& m, const Arenas& a, std::unique_ptr<DataPath> dp, Backend& b)
      : dp_(std::move(dp)), o_(o), m_(m), a_(a), b_(b), switches_(parse_switches(o.switches)), profile_(m.num_layers()),
        telemetry_(o.metrics, b.rank()), pm_(a.num_params), coll_(*dp_, b, o.check_collectives),
        copies_(coll_, a_, ranges_, pm_, layer_codec_, o.average_optimizer_state ? a.state_slots : 0) {
    const int L = m.num_layers();
    for (auto* l : m.layers()) {
      meta_.push_back({l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
      ranges_.push_back({l->param_offset(), l->num_params(), l->buffer_offset(), l->num_buffers()});
    }
    actions_.assign(L, Action::None);
    trigger_.assign(L, -1);
    stale_.assign(L, 0);
    ready_.assign(L, 0);
    lockstep_.assign(L, true);  // after the initial broadcast every layer is identical everywhere
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    hosts_ = b_.allgather(host);
    set_policy(o.policy);
    // Identical starting point everywhere (PyTorch DDP broadcasts at construction too).
    dp_->broadcast(b_, a_.params, size_t(a_.num_params), 0)->wait();
    if (a_.num_buffers) dp_->broadcast(b_, a_.buffers, size_t(a_.num_buffers), 0)->wait();
    pm_.anchor(a_.params, 0, a_.num_params);  // set_policy made them from the parameters before they were equal
  }

  ~LayerSync() override {
    try {
    } catch (...) {
    }
  }

  const std::vector<std::string>& hosts() const override { return hosts_; }

  void begin_step(int64_t step) override {
    step_ = step;
    t_bwd_ = now_s();  // blocking averages made here (switch, lock-step entry) are logged relative to this
    coll_.stats() = {};
    coll_.set_step(step);
    agreed_anomalies_ = 0;
    apply_agreed_votes();
    merge_delayed(/*all=*/false);
    while (next_switch_ < switches_.size() && switches_[next_switch_].step <= step) {
      // A layer that changes regime is first averaged once: averaging everything local is that, in one go.
      merge_delayed(/*all=*/true);
      average_all(false, /*log=*/true);
      set_policy(switches_[next_switch_].spec);
      pm_.anchor(a_.params, 0, a_.num_params);  // every layer is equal on all ranks after the average
      if (o_.metrics) o_.metrics->append_event(step, "switch", switches_[next_switch_].spec);
      ++next_switch_;
    }
    const bool lockstep_all = step < policy_->profile_steps() || step < fallback_until_;
    std::vector<bool> was_lockstep;
    if (pm_.active()) was_lockstep = lockstep_;
    const auto entering = decide_step(*policy_, step, lockstep_all, actions_, lockstep_, stale_);
    // A layer leaving lock-step is equal on all ranks now: its anchor for transformed averages.
    if (pm_.active())
      for (int l = 0; l < m_.num_layers(); ++l)
        if (was_lockstep[size_t(l)] && !lockstep_[size_t(l)]) pm_.anchor(a_.params, ranges_[l].param_off, ranges_[l].param_n);
    // A pending correction applied after a layer became lock-step would make the ranks differ again.
    if (std::find(entering.begin(), entering.end(), true) != entering.end()) merge_delayed(/*all=*/true);
    enter_lockstep(entering);
    plan_launches();
  }

  // Lock-step means identical parameters AND optimizer state on every rank (the same averaged gradient then
  // keeps them identical). A layer entering lock-step from a local regime (a switch, a fallback, a policy that
  // changes its mind) is therefore first averaged once, parameters, buffers and optimizer state. All ranks see
  // the same transitions, so this blocking average is a collective like any other.
  void enter_lockstep(const std::vector<bool>& entering) {
    bool any = false;
    for (bool e : entering) any |= e;
    if (any) average_layers(entering, /*optimizer_state=*/true, /*all_buffers=*/false, /*log=*/true);
  }

  void plan_launches() {
    buckets_ = plan_buckets(actions_, ranges_, o_.first_bucket_bytes, o_.bucket_cap_bytes);
    trigger_ = bucket_triggers(buckets_, m_.num_layers());
    inflight_.clear();
    instep_.clear();
    launched_ = 0;
    // With delay=T this step's averages are merged T steps later: their layers are updated locally now.
    delayed_now_.assign(size_t(m_.num_layers()), false);
    if (merge_.delay > 0)
      for (auto& bk : buckets_)
        if (averages_params(bk.action))
          for (int l = bk.lo; l <= bk.hi; ++l) delayed_now_[size_t(l)] = true;
  }

  void begin_backward() override { t_bwd_ = now_s(); }

  void on_layer_ready(int l) override {
    // On a device the hook runs when the layer's kernels are queued: profiling steps wait for them to run.
    if (dp_->on_device() && step_ < policy_->profile_steps()) dp_->wait_layer_ready(l);
    ready_[l] = now_s();
    // compress=auto needs the signals only while it measures; the policy's own, every step.
    if (signals_on_ && (policy_->wants_signals() || !auto_decided_)) take_signals(l);
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

  void finish_backward() override {
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

  void finish_backward_and_update(const std::function<void(int)>& update) override {
    check_all_launched();
    for (int l = m_.num_layers() - 1; l >= 0; --l)
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

 private:
  // Every planned bucket was launched before the wait: a model that forgot a notify would otherwise skip a bucket
  // silently on this rank (and leave the others waiting in a collective it never joins).
  void check_all_launched() const {
    if (launched_ == int(buckets_.size())) return;
    const Bucket& b = buckets_[size_t(launched_)];
    throw std::logic_error("sync: step " + std::to_string(step_) + ": bucket " + std::to_string(launched_) + " of " +
                           std::to_string(buckets_.size()) + " (layers " + std::to_string(b.lo) + ".." + std::to_string(b.hi) +
                           ") was never launched: the model's backward did not report layer " + std::to_string(b.lo) +
                           " to the hook");
  }

  void end_of_backward(double t1) {
    record_timeline(t1);
    if (step_ < policy_->profile_steps()) profile_.add(step_, ready_, t_bwd_);
  }

 public:
  float lr_factor(int l) const override {
    return o_.staleness_gamma > 0 ? float(std::pow(o_.staleness_gamma, double(stale_[l]))) : 1.0f;
  }

  void after_update() override {
    cast_votes();  // after the update: the trainer's anomaly report of this step rides along
    if (policy_->full_average_after(step_)) {
      const double t0 = now_s();
      if (merge_.delay > 0 || merge_.transforms()) periodic_average();
      else average_all(true, /*log=*/true);
      coll_.stats().exposed_ms += (now_s() - t0) * 1e3;
      std::fill(stale_.begin(), stale_.end(), 0);
    }
    if (policy_->profile_steps() > 0 && step_ + 1 == policy_->profile_steps()) finish_profile();
  }

  void finalize() override {
    apply_agreed_votes(/*all=*/true);
    merge_delayed(/*all=*/true);
    average_all(false);
  }

  StepCommStats step_stats() const override { return coll_.stats(); }

  void report_anomaly() override { local_anomaly_ = true; }
  int agreed_anomalies() const override { return agreed_anomalies_; }
  int64_t agreed_anomaly_step() const override { return agreed_anomaly_step_; }
  void fallback(int64_t steps) override {
    // Called by every rank at the same step (after agreed_anomalies()): average once — parameters, buffers and,
    // since the layers enter lock-step, optimizer state — then lock-step.
    merge_delayed(/*all=*/true);
    std::vector<bool> local(m_.num_layers());
    for (int l = 0; l < m_.num_layers(); ++l) local[l] = !lockstep_[l];
    average_layers(local, /*optimizer_state=*/true, /*all_buffers=*/true, /*log=*/true);
    std::fill(stale_.begin(), stale_.end(), 0);
    fallback_until_ = step_ + 1 + steps;
    // This step's plan was made before the fallback: it becomes lock-step too.
    std::fill(actions_.begin(), actions_.end(), Action::AllreduceGrads);
    std::fill(lockstep_.begin(), lockstep_.end(), true);
    plan_launches();
    if (o_.metrics) o_.metrics->append_event(step_, "fallback", "lock-step until step " + std::to_string(fallback_until_));
  }

  std::string save_state() override {
    // The votes still to be applied (in flight or agreed): their sums, to apply at the same steps after a resume.
    ByteWriter w;
    w.put_str(policy_spec_);
    w.put<uint64_t>(next_switch_);
    w.put<int64_t>(step_);
    w.put_vec(stale_);
    controls_.save(w);
    // Delayed averages in flight: their all-reduces are finished now; theta(t) and avg(theta(t)) are kept, to be
    // merged at the same step after a resume.
    copies_.save(w);
    w.put_bools(has_prev_);
    w.put_floats(prev_grads_.data(), signals_on_ ? prev_grads_.size() : 0);
    profile_.save(w);
    w.put<int64_t>(plan_version_);
    w.put<int64_t>(fallback_until_);
    w.put_bools(lockstep_);
    w.put_str(policy_->save_state());
    pm_.save(w);
    std::vector<int8_t> codecs;
    for (Codec c : layer_codec_) codecs.push_back(int8_t(c));
    w.put_vec(codecs);
    w.put<uint8_t>(auto_decided_);
    w.put<int64_t>(auto_from_);
    w.put<int32_t>(auto_n_);
    w.put_vec(auto_sum_);
    return w.bytes();
  }

  void load_state(const std::string& blob) override {
    ByteReader r(blob);
    const std::string spec = r.get_str();
    if (spec != policy_spec_) set_policy(spec);  // after a switch (collective for hier's sub-groups)
    next_switch_ = r.get<uint64_t>();
    step_ = r.get<int64_t>();
    auto stale = r.get_vec<int64_t>();
    if (stale.size() != stale_.size()) throw UsageError("checkpoint: engine state is for another model");
    stale_ = stale;
    controls_.load(r, generation_, layout_);
    copies_.load(r, m_.num_layers());
    auto has_prev = r.get_bools();
    if (signals_on_) has_prev_ = has_prev;
    r.get_floats(prev_grads_.data(), signals_on_ ? prev_grads_.size() : 0);
    profile_.load(r);
    plan_version_ = r.get<int64_t>();
    fallback_until_ = r.get<int64_t>();
    auto lockstep = r.get_bools();
    if (lockstep.size() != lockstep_.size()) throw UsageError("checkpoint: engine state is for another model");
    lockstep_ = lockstep;
    policy_->load_state(r.get_str());
    pm_.load(r);
    const auto codecs = r.get_vec<int8_t>();
    if (codecs.size() != layer_codec_.size()) throw UsageError("checkpoint: engine state is for another model");
    for (size_t l = 0; l < codecs.size(); ++l) {
      if (codecs[l] < 0 || codecs[l] > int8_t(Codec::Int8)) throw UsageError("checkpoint: engine state holds an unknown codec");
      layer_codec_[l] = Codec(codecs[l]);
    }
    auto_decided_ = r.get<uint8_t>() != 0;
    auto_from_ = r.get<int64_t>();
    auto_n_ = r.get<int32_t>();
    auto sums = r.get_vec<double>();
    if (sums.size() != auto_sum_.size()) throw UsageError("checkpoint: engine state is for another model");
    auto_sum_ = sums;
    plan_version_ = policy_->plan_version();
    if (!r.done()) throw UsageError("checkpoint: engine state has trailing bytes");
  }

  void with_consensus(const std::function<void()>& fn) override {
    std::vector<float> p, bu;
    dp_->save(a_.params, size_t(a_.num_params), p);
    dp_->save(a_.buffers, size_t(a_.num_buffers), bu);
    average_all(false);
    fn();
    dp_->restore(a_.params, size_t(a_.num_params), p);
    dp_->restore(a_.buffers, size_t(a_.num_buffers), bu);
  }

 private:
  void set_policy(const std::string& spec) {
    ++generation_;  // votes cast under an earlier policy are not handed to this one
    policy_ = make_policy(PolicySpec::parse(spec));
    policy_spec_ = spec;
    policy_->setup(meta_, b_.size());
    plan_version_ = policy_->plan_version();
    const int L = m_.num_layers();
    merge_ = policy_->merge();
    signals_on_ = policy_->wants_signals() || merge_.compress_auto;
    check_policy_fits_device(*policy_, spec, dp_->on_device());
    if ((merge_.delay > 0 || merge_.transforms()) && dp_->on_device())
      throw UsageError("--policy " + spec + ": delay=, outer= and compress= keep host copies of the averaged layers; not on --device cuda");
    if (merge_.compress != Codec::None && b_.name() == "nccl")
      throw UsageError("--policy " + spec + ": compress= needs the byte channel of gloo or mpi, not nccl");
    pm_.configure(merge_, a_.params);
    if (signals_on_) {
      prev_grads_.resize(size_t(a_.num_params));
      signals_.grad_norm.assign(L, 0);
      signals_.cos_prev.assign(L, 1);
      signals_.stale.assign(L, 0);
      has_prev_.assign(L, false);
    }
    policy_votes_ = size_t(L) * size_t(policy_->votes_per_layer());
    // Control vector: the policy's votes, then [control-file switch request, anomaly flag] when those are on.
    // compress=auto: one more float per layer, each layer's local cos between successive gradients, while it measures.
    auto_votes_ = merge_.compress_auto ? size_t(L) : 0;
    layer_codec_.assign(size_t(L), merge_.compress);
    auto_sum_.assign(size_t(L), 0.0);
    auto_n_ = 0;
    auto_from_ = step_;
    auto_decided_ = !merge_.compress_auto;
    layout_ = {policy_votes_, !o_.control_file.empty(), o_.anomaly_votes, auto_votes_};
    votes_.resize(layout_.size());
    // When the control vector carries only the anomaly flag, nothing decides from it in the next step: it is
    // applied two steps late, so its all-reduce hides behind a whole step instead of making every step wait for
    // the slowest rank (a per-step rendezvous that cost 2-3 ms a step on the emulated 1 Gbit/s cluster). Policy
    // votes and control-file requests keep the one-step lag of DESIGN.md.
    vote_lag_ = (policy_votes_ == 0 && o_.control_file.empty()) ? 2 : 1;
    auto groups = policy_->groups(hosts_);
    if (!groups.empty()) {
      if (int(groups.size()) != b_.size()) throw UsageError("--policy " + spec + ": topology does not cover the ranks");
      group_ = groups[b_.rank()];
      intra_ = b_.split(group_);  // collective: every rank switches policy at the same step
    } else {
      intra_.reset();
      group_ = 0;
    }
    if (o_.verbose && b_.rank() == 0) {
      std::string plan = policy_->plan();
      std::fprintf(stderr, "sync: policy %s on %d ranks, %d layers%s%s\n", policy_->describe().c_str(), b_.size(),
                   m_.num_layers(), plan.empty() ? "" : "\n", plan.c_str());
    }
  }

  WorkPtr allreduce(Backend& g, float* p, int64_t n, const char* what, int ready_layer = -1) {
    return coll_.average(g, p, n, what, ready_layer);
  }
  WorkPtr allreduce(float* p, int64_t n, const char* what) { return allreduce(b_, p, n, what); }
  float* arena(const BucketPart& p) const { return arena_ptr(a_, p); }
  Backend& group_of(const Bucket& bk) { return bk.action == Action::AverageGroup ? *intra_ : b_; }

  void launch(const Bucket& bk) {
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
    Backend& g = bk.action == Action::AverageGroup ? *intra_ : b_;
    for (auto& part : bucket_parts(bk, true, o_.average_optimizer_state ? a_.state_slots : 0, a_.num_params))
      f.works.push_back(allreduce(g, arena(part), part.n, part.what, bk.lo));
    inflight_.push_back(std::move(f));
  }

  // localsgd with delay= or a transform: the whole-model average after the update of this step, on copies; blocking
  // and applied at once (delay=0) or merged at the start of step + delay.
  void periodic_average() {
    std::vector<bool> local(m_.num_layers());
    for (int l = 0; l < m_.num_layers(); ++l) local[l] = !lockstep_[l];
    std::vector<CopyAverage> sent;
    for (auto& bk : plan_average(local, ranges_, o_.bucket_cap_bytes))
      sent.push_back(copies_.launch(b_, bk, step_, step_ + merge_.delay, t_bwd_, -1));
    if (merge_.delay > 0) {
      for (auto& d : sent) copies_.defer(std::move(d));
      return;
    }
    for (auto& d : sent) {
      for (auto& w : d.works) w->wait();
      copies_.apply(d, /*in_step=*/true);
      InFlight f{d.bucket, {}, d.launch_s, d.bytes};
      f.works = d.works;
      log_sync_event(f, now_s(), step_, t_bwd_);
    }
  }

  // Merges the delayed averages due by this step (all of them when `all`: before a switch, a fallback, a lock-step
  // entry, the end), oldest first: theta += avg(theta(t)) - theta(t).
  void merge_delayed(bool all) {
    while (copies_.due(step_, all)) {
      CopyAverage d = copies_.pop();
      const double t0 = now_s();
      double end = 0;
      for (auto& w : d.works)
        if (w) w->wait(), end = std::max(end, w->end_time());
      coll_.stats().exposed_ms += (now_s() - t0) * 1e3;
      copies_.apply(d, /*in_step=*/false);
      if (o_.metrics && d.t_bwd > 0) {
        InFlight f{d.bucket, {}, d.launch_s, d.bytes};
        log_sync_event(f, end > 0 ? end : now_s(), d.step, d.t_bwd);
      }
    }
  }

  // Blocking average of every layer that is not lock-step (their parameters differ across ranks) and of all
  // buffers. Lock-step layers are already bitwise identical and are left alone: re-averaging equal values
  // can round (x+x+x != 3x in float).
  // `log`: write one /sync_events row per bucket (the blocking averages of a step: Local SGD's, a switch's);
  // the consensus copies of evaluation and the final average are not steps and are not logged.
  void average_all(bool count_stats, bool log = false) {
    std::vector<bool> local(m_.num_layers());
    for (int l = 0; l < m_.num_layers(); ++l) local[l] = !lockstep_[l];
    const int64_t bytes0 = coll_.stats().bytes;
    average_layers(local, o_.average_optimizer_state, /*all_buffers=*/true, log);
    if (!count_stats) coll_.stats().bytes = bytes0;
  }

  // Blocking average of the parameters of the chosen layers (and, optionally, their optimizer state); buffers
  // of the chosen layers, or of all layers.
  void average_layers(const std::vector<bool>& which, bool optimizer_state, bool all_buffers, bool log = false) {
    std::vector<InFlight> sent;
    for (auto& bk : plan_average(which, ranges_, o_.bucket_cap_bytes)) {
      InFlight f{bk, {}, now_s()};
      for (auto& part : bucket_parts(bk, !all_buffers, optimizer_state ? a_.state_slots : 0, a_.num_params))
        f.works.push_back(allreduce(arena(part), part.n, part.what));
      sent.push_back(std::move(f));
    }
    WorkPtr buffers;
    if (all_buffers && a_.num_buffers) buffers = allreduce(a_.buffers, a_.num_buffers, "average-buffers");
    for (auto& f : sent)
      for (auto& w : f.works) w->wait();
    if (buffers) buffers->wait();
    if (log)
      for (auto& f : sent) log_sync_event(f, now_s(), step_, t_bwd_);
  }

  void record_timeline(double t_end) {
    telemetry_.layer_ready(step_, ready_, t_bwd_);
    for (auto& f : inflight_) log_sync_event(f, t_end, step_, t_bwd_);
  }

  void log_sync_event(const InFlight& f, double t_end, int64_t step, double t_bwd) {
    telemetry_.bucket(step, f.bucket, f.works, f.bytes, f.launch_s, t_end, t_bwd, 1 + group_);
  }

  // Local signals of layer l from its local gradient, before any all-reduce touches it.
  void take_signals(int l) {
    const auto& r = ranges_[l];
    const float* g = a_.grads + r.param_off;
    float* prev = prev_grads_.data() + r.param_off;
    double gg = 0, pp = 0, gp = 0;
    for (int64_t i = 0; i < r.param_n; ++i) {
      gg += double(g[i]) * g[i];
      pp += double(prev[i]) * prev[i];
      gp += double(g[i]) * prev[i];
      prev[i] = g[i];
    }
    signals_.grad_norm[l] = std::sqrt(gg);
    signals_.cos_prev[l] = has_prev_[l] && gg > 0 && pp > 0 ? gp / std::sqrt(gg * pp) : 1.0;
    signals_.stale[l] = stale_[l];
    has_prev_[l] = true;
  }

  // The control all-reduce: votes of this step, summed over ranks asynchronously, applied at the next step.
  void cast_votes() {
    if (votes_.size() == 0) return;
    if (policy_votes_) policy_->cast_votes(step_, signals_, votes_.data());
    size_t k = policy_votes_;
    if (!o_.control_file.empty()) votes_[k++] = b_.rank() == 0 && poll_control_file() ? 1.0f : 0.0f;
    if (o_.anomaly_votes) votes_[k++] = local_anomaly_ ? 1.0f : 0.0f;
    local_anomaly_ = false;
    for (size_t l = 0; l < auto_votes_; ++l) votes_[k++] = float(signals_.cos_prev[l]);
    coll_.fingerprint("control", int64_t(votes_.size()));
    controls_.cast(step_, generation_, layout_, votes_.data(), *dp_, b_);
  }

  // Applies, oldest first, every control vector cast at least vote_lag_ steps ago (all of them when `all`).
  void apply_agreed_votes(bool all = false) {
    double waited = 0;
    auto due = controls_.due(step_, vote_lag_, all, &waited);
    coll_.stats().exposed_ms += waited * 1e3;
    for (auto& c : due) apply_votes(c);
  }

  void apply_votes(const ControlVector& c) {
    const float* v = c.sums->data();
    const bool same_policy = c.generation == generation_;
    size_t k = c.layout.policy_votes;
    const bool switch_requested = c.layout.switch_flag && v[k++] > 0.5f;
    const int seen = c.layout.anomaly_flag ? int(v[k++] + 0.5f) : 0;
    if (same_policy && c.layout.auto_votes) agree_codecs(c.step, v + k);
    if (seen > 0 && agreed_anomalies_ == 0) agreed_anomaly_step_ = c.step;
    agreed_anomalies_ += seen;
    if (policy_votes_ && same_policy) policy_->on_agreed(c.step, v, b_.size());
    print_plan_if_changed();
    if (switch_requested) {
      // Rank 0 read a new spec; everyone learns it (one small blocking allgather) and switches at this step.
      const std::string spec = b_.allgather(b_.rank() == 0 ? pending_spec_ : std::string())[0];
      merge_delayed(/*all=*/true);
      average_all(false, /*log=*/true);
      set_policy(spec);
      pm_.anchor(a_.params, 0, a_.num_params);
      if (o_.metrics) o_.metrics->append_event(step_, "switch", spec + " (control file)");
    }
  }

  // compress=auto: the agreed cos of each layer over kAutoSteps steps (from the second after the policy started: the
  // first has no previous gradient), then a codec per layer (choose_codecs), the same on every rank.
  static constexpr int kAutoSteps = 10;
  void agree_codecs(int64_t step, const float* sums) {
    if (auto_decided_ || step <= auto_from_) return;
    for (size_t l = 0; l < auto_sum_.size(); ++l) auto_sum_[l] += double(sums[l]) / b_.size();
    if (++auto_n_ < kAutoSteps) return;
    std::vector<double> mean(auto_sum_.size());
    for (size_t l = 0; l < mean.size(); ++l) mean[l] = auto_sum_[l] / auto_n_;
    layer_codec_ = choose_codecs(mean);
    auto_decided_ = true;
    std::ostringstream o;
    o << "compress=auto after " << auto_n_ << " steps (agreed mean cos between successive gradients):";
    for (size_t l = 0; l < mean.size(); ++l) o << " " << meta_[l].name << "=" << codec_name(layer_codec_[l]) << "(" << mean[l] << ")";
    if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "sync: %s\n", o.str().c_str());
    if (o_.metrics) o_.metrics->append_event(step_, "compress", o.str());
  }

  // Rank 0: a new, valid spec in the control file since the last look? (checked every 10 steps; bad specs are
  // reported and ignored, never fatal for a running job)
  bool poll_control_file() {
    if (step_ % 10 != 0) return false;
    std::ifstream f(o_.control_file);
    if (!f) return false;
    std::string spec((std::istreambuf_iterator<char>(f)), {});
    while (!spec.empty() && std::isspace(uint8_t(spec.back()))) spec.pop_back();
    while (!spec.empty() && std::isspace(uint8_t(spec.front()))) spec.erase(spec.begin());
    if (spec.empty() || spec == last_control_spec_) return false;
    last_control_spec_ = spec;
    try {
      make_policy(PolicySpec::parse(spec));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sync: ignoring control file %s: %s\n", o_.control_file.c_str(), e.what());
      return false;
    }
    pending_spec_ = spec;
    return true;
  }

  void print_plan_if_changed() {
    if (policy_->plan_version() == plan_version_) return;
    plan_version_ = policy_->plan_version();
    if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "%s\n", policy_->plan().c_str());
  }

  // Self-profiling (dreamddp): the agreed profile of the lock-step steps hands the policy its schedule.
  void finish_profile() {
    policy_->on_profile(profile_.finish(*dp_, b_, meta_));
    print_plan_if_changed();
  }

  std::unique_ptr<DataPath> dp_;  // first member: outlives every in-flight Work that refers to it
  EngineOptions o_;
  models::Model& m_;
  Arenas a_;
  Backend& b_;
  std::vector<PolicySwitch> switches_;
  size_t next_switch_ = 0;
  std::unique_ptr<Policy> policy_;
  std::vector<LayerMeta> meta_;
  std::vector<LayerRange> ranges_;
  std::vector<Action> actions_;
  std::vector<bool> lockstep_;
  std::vector<Bucket> buckets_;
  std::vector<int> trigger_;
  std::vector<InFlight> inflight_;
  std::vector<int64_t> stale_;
  std::vector<double> ready_;
  SelfProfile profile_;
  SyncTelemetry telemetry_;
  int64_t step_ = 0;
  double t_bwd_ = 0;
  std::vector<std::string> hosts_;
  std::string policy_spec_;
  size_t policy_votes_ = 0;
  bool local_anomaly_ = false;
  int agreed_anomalies_ = 0;
  int64_t agreed_anomaly_step_ = -1;
  int64_t fallback_until_ = 0;
  std::string pending_spec_, last_control_spec_;
  int64_t plan_version_ = 0;
  std::unique_ptr<Backend> intra_;
  int group_ = 0;
  bool signals_on_ = false;
  LayerSignals signals_;
  FloatBuffer prev_grads_, votes_;
  std::vector<bool> has_prev_;
  ControlQueue controls_;
  ControlLayout layout_;
  std::vector<CopyAverage> instep_;  // this step's transformed in-step averages (InFlight::record)
  int launched_ = 0;             // buckets of this step's plan launched so far (in plan order)
  // compress=auto: the codec of each layer, and its measurement (LayerSync::agree_codecs).
  std::vector<Codec> layer_codec_;
  size_t auto_votes_ = 0;
  std::vector<double> auto_sum_;
  int auto_n_ = 0;
  int64_t auto_from_ = 0;
  bool auto_decided_ = true;
  MergeSpec merge_;
  ParamMerge pm_;
  std::vector<bool> delayed_now_;  // layers whose average of this step is delayed (updated locally now)
  int vote_lag_ = 1;
  uint64_t generation_ = 0;
  Collectives coll_;
  CopyAverages copies_;  // last: its destructor waits for the deferred averages' collectives
};

}  // namespace

std::unique_ptr<SyncEngine> make_layer_sync(const EngineOptions& o, models::Model& m, optim::Optimizer& opt,
                                            Backend& b) {
  Arenas a;
  a.params = m.params().data();
  a.grads = m.grads().data();
  a.buffers = m.buffers().data();
  a.opt_state = opt.state().data();
  a.num_params = int64_t(m.params().size());
  a.num_buffers = int64_t(m.buffers().size());
  a.state_slots = opt.state_slots();
  return std::make_unique<LayerSync>(o, m, a, std::make_unique<HostDataPath>(), b);
}

std::unique_ptr<SyncEngine> make_layer_sync(const EngineOptions& o, models::Model& m, const Arenas& a,
                                            std::unique_ptr<DataPath> dp, Backend& b) {
  return std::make_unique<LayerSync>(o, m, a, std::move(dp), b);
}

}  // namespace dd::sync
