// dreamddp:h=H: every layer averaged once per H steps at the phase the schedule solver picks from a per-layer
// profile (self-measured during the first steps, lock-step meanwhile, or read from profile=DIR), plus fill-in
// syncs where the modelled channel is idle, fused into the buckets a phase launches anyway (on by default, as in the
// paper's system; fillin=0 for the bare schedule). Fill-in is free under the time model; see schedule_model.h for why
// it never opens a collective of its own. In-step (no delay, no outer optimizer or compression), where the profile
// says overlapped communication and compute slow each other enough (its contention, several ranks sharing cores), dreamddp
// runs Local SGD's blocking schedule when the model scores it faster (schedule_choice.h); fallback=0 keeps the
// layer-wise schedule regardless. Where the two are modelled close on shared cores, both may be measured for 2
// periods each and the faster runs: by default only when the schedule is self-profiled (the run depends on timing
// anyway); with profile=DIR only with trial=1, so a run from a profile file is a function of its inputs.
// Every decision taken from a measurement (the profile, the schedule, the trial's verdict) is recorded in
// metrics.h5's /decisions (decisions()); replay=RUN_DIR takes a recorded run's decisions instead of measuring, and
// then runs bitwise the same (its lock-step profiling window and its trial's windows included).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/common/bytes.h"
#include "core/common/error.h"
#include "core/sync/policy.h"
#include "core/telemetry/metrics_import.h"
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
        replay_dir_(s.get_str("replay", "")), profile_steps_(s.get_int("profile_steps", 6, 2, 10000)),
        fallback_(s.get_bool("fallback", true)), trial_(s.get_bool("trial", default_trial())) {
    s.allow_only_with_merge_keys({"h", "fillin", "profile", "profile_steps", "fallback", "trial", "replay"});
    if (!profile_dir_.empty() && !replay_dir_.empty())
      throw UsageError("--policy dreamddp: profile= and replay= cannot be combined (a replay takes the recorded "
                       "run's profile)");
    // Fill-in adds averages of a layer between its own: with a delay two of them could be in flight at once.
    if (delay_ > 0 && fillin_)
      throw UsageError("--policy dreamddp: delay=" + std::to_string(delay_) + " and fill-in cannot be combined (two "
                       "averages of one layer would be in flight); drop fillin=1 (fill-in is off by default with a delay)");
    if (!profile_dir_.empty()) file_profile_ = read_profile(profile_dir_);
    if (!replay_dir_.empty()) load_replay();
  }
  std::string describe() const override {
    return "dreamddp:h=" + std::to_string(h_) + (fillin_ == default_fillin() ? "" : fillin_ ? ",fillin=1" : ",fillin=0") +
           (fallback_ ? "" : ",fallback=0") + (trial_ == default_trial() ? "" : trial_ ? ",trial=1" : ",trial=0") +
           merge_.describe() + (profile_dir_.empty() ? "" : ",profile=" + profile_dir_) +
           (replay_dir_.empty() ? "" : ",replay=" + replay_dir_);
  }
  MergeSpec merge() const override { return merge_; }

  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    if (replay_) {
      if (replay_->names.size() != layers.size())
        throw UsageError("--policy dreamddp: replay=" + replay_dir_ + " recorded " + std::to_string(replay_->names.size()) +
                         " layers, this model has " + std::to_string(layers.size()));
      for (size_t l = 0; l < layers.size(); ++l)
        if (replay_->names[l] != layers[l].name)
          throw UsageError("--policy dreamddp: replay=" + replay_dir_ + " recorded layer '" + replay_->names[l] +
                           "' where this model has '" + layers[l].name + "'");
      if (!replay_->self_profiled) on_profile(replay_->times);
      return;
    }
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

  void on_profile(const LayerTimes& measured) override {
    // A replay keeps the recorded profile (its own profiling steps ran lock-step as the recorded ones did).
    const LayerTimes& t = replay_ ? replay_->times : measured;
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
    model_local_sgd_ = local_sgd_;
    // Where contention is measured the model sees only part of what sharing cores costs (ranks waiting for each
    // other at every collective, on cores their peers' communication threads also use): within kTrialMargin of
    // each other and with a contention above the probe's noise, the two schedules are measured instead, 2 periods each (layer-wise, Local SGD, Local SGD,
    // layer-wise), and the faster one runs.
    const bool shared = std::max(t.contention.compute, t.contention.comm) >= kContended;
    trial_pending_ = fallback_ && trial_ && shared && !merge_.transforms() &&
                     std::abs(choice.layerwise_s - choice.localsgd_s) <= kTrialMargin * choice.localsgd_s;
    trial_start_ = -1;
    trial_layerwise_s_ = trial_local_s_ = 0;
    if (replay_) {  // the recorded schedule and trial, as they ran (a solver change cannot alter a replay)
      phase_ = replay_->phase;
      extra_ = replay_->fill;
      local_sgd_ = model_local_sgd_ = replay_->model_local_sgd;
      trial_pending_ = replay_->trial;
    }
  }

  // Local SGD's schedule: the whole model, blocking, after the update of every H-th step.
  bool full_average_after(int64_t step) const override { return local_at(step) && (step + 1) % h_ == 0; }

  int64_t period() const override { return h_; }
  // A trial, where one may come, is measured from the second period boundary after the profile, over 4 periods.
  int64_t settled_by(int64_t start) const override {
    const int64_t p = std::max(start, first_step_ + profile_steps());
    const bool may_trial = phase_.empty() ? (replay_ ? replay_->trial : fallback_ && trial_ && delay_ == 0 && !merge_.transforms())
                                          : trial_pending_;
    return may_trial ? first_trial_step(p) + kTrialPeriods * int64_t(h_) : p;
  }
  void on_step_begin(int64_t step) override {
    // One whole period first: the first steps of a run (first collectives, first-touch memory) would weigh on the
    // trial's first window, and that window is the layer-wise one.
    if (trial_pending_ && trial_start_ < 0)
      trial_start_ = replay_ ? first_step_ + replay_->trial_offset : first_trial_step(step);
  }
  std::vector<int64_t> timed_periods() const override {
    if (!trial_pending_ || trial_start_ < 0) return {};
    std::vector<int64_t> s;
    for (int i = 0; i <= kTrialPeriods; ++i) s.push_back(trial_start_ + int64_t(i) * h_);
    return s;
  }
  void on_period_times(int64_t, const std::vector<double>& s) override {
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

  // JSON (docs/design.md, HDF5 /decisions): the profile the schedule came from, the schedule, the trial.
  std::string decisions() const override {
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
    if (self) prof["steps"] = profile_steps_;
    j["profile"] = prof;
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

  Action decide(int layer, int64_t step) const override {
    if (local_at(step)) return Action::None;
    // The engine keeps a profiling policy in lock-step and never asks it (profiling(), counted from first_step()).
    if (phase_.empty())
      throw std::logic_error("dreamddp: asked for layer " + std::to_string(layer) + " at step " + std::to_string(step) +
                             " before it has a schedule (profiling from step " + std::to_string(first_step_) + ")");
    const int p = int(step % h_);
    if (phase_[layer] == p) return Action::AverageParams;
    for (int q : extra_[layer])
      if (q == p) return Action::AverageParams;
    return Action::None;
  }

  std::string plan() const override {
    if (phase_.empty()) return "dreamddp: profiling backward and communication during the first " +
                               std::to_string(profile_steps_) + " steps" +
                               (first_step_ > 0 ? " from step " + std::to_string(first_step_) : std::string()) +
                               " (lock-step meanwhile)";
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
  bool default_trial() const { return profile_dir_.empty() && replay_dir_.empty(); }
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
  };
  void load_replay() {
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
  std::string profile_dir_, replay_dir_;
  int64_t profile_steps_;
  std::optional<Replay> replay_;
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
  bool model_local_sgd_ = false;
};

const bool registered = register_policy("dreamddp", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<DreamDdpPolicy>(s);
});

}  // namespace

}  // namespace dd::sync
