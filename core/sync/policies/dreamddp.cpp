// dreamddp:h=H: every layer averaged once per H steps at the phase the schedule solver picks from a per-layer
// profile (self-measured during the first steps, lock-step meanwhile, or read from profile=DIR), plus fill-in
// syncs where the modelled channel is idle, fused into the buckets a phase launches anyway (on by default, as in the
// paper's system; fillin=0 for the bare schedule). Fill-in is free under the time model; see schedule_model.h for why
// it never opens a collective of its own. In-step (no delay, no outer optimizer or compression), where the profile
// says overlapped communication and compute slow each other enough (its contention, several ranks sharing cores), dreamddp
// runs Local SGD's blocking schedule when the model scores it faster (schedule_choice.h); fallback=0 keeps the
// layer-wise schedule regardless. Where the two are modelled close on shared cores, both are measured for 2 periods
// each and the faster runs (trial=0: the model alone decides).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/common/bytes.h"
#include "core/common/error.h"
#include "core/sync/policy.h"
#include "core/sync/profile_io.h"
#include "core/sync/schedule_bound.h"
#include "core/sync/schedule_choice.h"
#include "core/sync/schedule_model.h"
#include "core/sync/schedule_solver.h"

namespace dd::sync {
namespace {

class DreamDdpPolicy : public Policy {
 public:
  explicit DreamDdpPolicy(const PolicySpec& s)
      : h_(int(s.get_int("h", 8, 1, kMaxPhases))), merge_(parse_merge(s, "dreamddp", h_)), delay_(merge_.delay),
        fillin_(s.get_bool("fillin", default_fillin())), profile_dir_(s.get_str("profile", "")),
        profile_steps_(s.get_int("profile_steps", 6, 2, 10000)), fallback_(s.get_bool("fallback", true)),
        trial_(s.get_bool("trial", true)) {
    s.allow_only_with_merge_keys({"h", "fillin", "profile", "profile_steps", "fallback", "trial"});
    // Fill-in adds averages of a layer between its own: with a delay two of them could be in flight at once.
    if (delay_ > 0 && fillin_)
      throw UsageError("--policy dreamddp: delay=" + std::to_string(delay_) + " and fill-in cannot be combined (two "
                       "averages of one layer would be in flight); drop fillin=1 (fill-in is off by default with a delay)");
    if (!profile_dir_.empty()) file_profile_ = read_profile(profile_dir_);
  }
  std::string describe() const override {
    return "dreamddp:h=" + std::to_string(h_) + (fillin_ == default_fillin() ? "" : fillin_ ? ",fillin=1" : ",fillin=0") +
           (fallback_ ? "" : ",fallback=0") + (trial_ ? "" : ",trial=0") + merge_.describe() + (profile_dir_.empty() ? "" : ",profile=" + profile_dir_);
  }
  MergeSpec merge() const override { return merge_; }

  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    if (profile_dir_.empty()) return;
    // A profile from a file must describe this model, layer by layer.
    LayerTimes t;
    for (auto& l : layers) {
      size_t i = 0;
      while (i < file_profile_.names.size() && file_profile_.names[i] != l.name) ++i;
      if (i == file_profile_.names.size())
        throw UsageError("--policy dreamddp: profile " + profile_dir_ + " has no layer '" + l.name +
                         "' of this model (write one with `dreamddp profile`)");
      t.backward_s.push_back(file_profile_.bp[i]);
      t.comm_s.push_back(file_profile_.comm[i]);
    }
    t.contention = file_profile_.contention;
    on_profile(t);
  }

  int64_t profile_steps() const override { return phase_.empty() ? profile_steps_ : 0; }

  void on_profile(const LayerTimes& t) override {
    times_ = t;
    // schedule_phases has no wall-clock cut-off: equal inputs give equal phases on every rank.
    phase_ = delay_ ? schedule_phases_delayed(t.backward_s, t.comm_s, h_, delay_)
                    : schedule_phases(t.backward_s, t.comm_s, h_);
    bound_ = schedule_lower_bound(t.backward_s, t.comm_s, h_);
    extra_.assign(phase_.size(), {});
    local_sgd_ = false;
    if (delay_) {
      modelled_ = delayed_time(t.backward_s, t.comm_s, h_, phase_, delay_, 0, 0);
      return;
    }
    // In-step: the overlap charge applies; only the plain average may fall back to Local SGD's schedule (with an
    // outer optimizer or compression the engine's full average is another computation).
    const auto choice =
        choose_in_step(t.backward_s, t.comm_s, h_, phase_, fillin_, merge_.transforms() ? Contention{} : t.contention);
    phase_ = choice.phase;
    if (fillin_) extra_ = choice.fill;
    modelled_ = choice.layerwise_s;
    localsgd_modelled_ = choice.localsgd_s;
    local_sgd_ = fallback_ && choice.local_sgd;
    // Where contention is measured the model sees only part of what sharing cores costs (ranks waiting for each
    // other at every collective, on cores their peers' communication threads also use): within kTrialMargin of
    // each other and with a contention above the probe's noise, the two schedules are measured instead, 2 periods each (layer-wise, Local SGD, Local SGD,
    // layer-wise), and the faster one runs.
    const bool shared = std::max(t.contention.compute, t.contention.comm) >= kContended;
    trial_pending_ = fallback_ && trial_ && shared && !merge_.transforms() &&
                     std::abs(choice.layerwise_s - choice.localsgd_s) <= kTrialMargin * choice.localsgd_s;
    trial_start_ = -1;
    trial_layerwise_s_ = trial_local_s_ = 0;
  }

  // Local SGD's schedule: the whole model, blocking, after the update of every H-th step.
  bool full_average_after(int64_t step) const override { return local_at(step) && (step + 1) % h_ == 0; }

  int64_t period() const override { return h_; }
  // A trial, where one may come, is measured from the second period boundary after the profile, over 4 periods.
  int64_t settled_by(int64_t start) const override {
    const int64_t p = std::max(start, profile_steps());
    const bool may_trial = phase_.empty() ? fallback_ && trial_ && delay_ == 0 && !merge_.transforms()
                                          : trial_pending_;
    return may_trial ? first_trial_step(p) + kTrialPeriods * int64_t(h_) : p;
  }
  void on_step_begin(int64_t step) override {
    // One whole period first: the first steps of a run (first collectives, first-touch memory) would weigh on the
    // trial's first window, and that window is the layer-wise one.
    if (trial_pending_ && trial_start_ < 0) trial_start_ = first_trial_step(step);
  }
  std::vector<int64_t> timed_periods() const override {
    if (!trial_pending_ || trial_start_ < 0) return {};
    std::vector<int64_t> s;
    for (int i = 0; i <= kTrialPeriods; ++i) s.push_back(trial_start_ + int64_t(i) * h_);
    return s;
  }
  void on_period_times(int64_t, const std::vector<double>& s) override {
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

  std::string save_state() const override {
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
    return w.bytes();
  }
  void load_state(const std::string& s) override {
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
  }

  int64_t plan_version() const override { return phase_.empty() ? 0 : 1 + decisions_; }

  Action decide(int layer, int64_t step) const override {
    if (local_at(step)) return Action::None;
    const int p = int(step % h_);
    if (phase_[layer] == p) return Action::AverageParams;
    for (int q : extra_[layer])
      if (q == p) return Action::AverageParams;
    return Action::None;
  }

  std::string plan() const override {
    if (phase_.empty()) return "dreamddp: profiling backward and communication during the first " +
                               std::to_string(profile_steps_) + " steps (lock-step meanwhile)";
    std::ostringstream o;
    o.precision(4);
    o << "dreamddp: schedule for H=" << h_ << (delay_ ? ", delay=" + std::to_string(delay_) : std::string()) << " (modelled " << modelled_ * 1e3 << " ms/iter backward+comm, bound "
      << bound_ * 1e3 << " ms; ddp " << ddp_time(times_.backward_s, times_.comm_s) * 1e3 << " ms";
    if (!times_.contention.none())
      o << "; contention charged: compute x" << 1 + times_.contention.compute << ", communication x"
        << 1 + times_.contention.comm << " while they overlap";
    o << ")";
    if (trial_pending_)
      o << "\n  modelled within " << kTrialMargin * 100 << "% of Local SGD's schedule (" << localsgd_modelled_ * 1e3
        << " ms/iter) where cores are shared: measuring both, 2 periods each, after one more period";
    else if (decisions_ > 0)
      o << "\n  measured: layer-wise " << trial_layerwise_s_ * 1e3 << " ms/step, Local SGD's schedule "
        << trial_local_s_ * 1e3 << " ms/step (2 periods each)";
    if (local_sgd_ && !trial_pending_)
      o << "\n  runs Local SGD's schedule (the whole model averaged, blocking, after every " << h_
        << "th update; modelled " << localsgd_modelled_ * 1e3 << " ms/iter)";
    o << (local_sgd_ && !trial_pending_ ? "\n  layer-wise schedule (not run):" : "\n  phase:");
    for (size_t l = 0; l < phase_.size(); ++l) o << " " << layers_[l].name << "=" << phase_[l];
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

 private:
  // Fill-in is on for the plain in-step average; off with a delay (it cannot be combined) and with an outer
  // optimizer or compression (each extra average would be one more outer step / encoded payload; ask with fillin=1).
  bool default_fillin() const { return delay_ == 0 && !merge_.transforms(); }
  // Local SGD's schedule at `step`: the trial's windows 1 and 2, else the decision.
  bool local_at(int64_t step) const {
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

  int h_;
  MergeSpec merge_;
  int delay_;
  bool fillin_;
  std::string profile_dir_;
  int64_t profile_steps_;
  LayerProfile file_profile_;
  LayerTimes times_;
  std::vector<int> phase_;
  FillIn extra_;
  bool fallback_, trial_;
  bool trial_pending_ = false;
  int64_t trial_start_ = -1, decisions_ = 0;
  double trial_layerwise_s_ = 0, trial_local_s_ = 0;
  double modelled_ = 0, bound_ = 0, localsgd_modelled_ = 0;
  bool local_sgd_ = false;  // Local SGD's schedule is run (fallback)
};

const bool registered = register_policy("dreamddp", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<DreamDdpPolicy>(s);
});

}  // namespace

}  // namespace dd::sync
