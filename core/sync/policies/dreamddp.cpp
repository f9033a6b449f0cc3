// dreamddp:h=H: every layer averaged once per H steps at the phase the schedule solver picks from a per-layer
// profile (by default recorded from the first steps, which run plsgd's contiguous groups meanwhile, the solved plan
// taking over at a period boundary; with lockstep=1 measured during lock-step steps; or read from profile=DIR), plus fill-in
// syncs where the modelled channel is idle, fused into the buckets a phase launches anyway (on by default, as in the
// paper's system; fillin=0 for the bare schedule). Fill-in is free under the time model; see schedule_model.h for why
// it never opens a collective of its own. In-step (no delay, no outer optimizer or compression), where the profile
// says overlapped communication and compute slow each other enough (its contention, several ranks sharing cores), dreamddp
// runs Local SGD's blocking schedule when the model scores it faster (schedule_choice.h); fallback=0 keeps the
// layer-wise schedule regardless. Where the two are modelled within a tenth of each other and the model is known to
// see only part of the cost, both are measured for 2 periods each and the faster runs: by default only when the
// schedule is self-profiled (the run depends on timing anyway); with profile=DIR only with trial=1, so a run from a
// profile file is a function of its inputs.
// Every decision taken from a measurement (the profile, the schedule, the trial's verdict) is recorded in
// metrics.h5's /decisions (decisions()); replay=RUN_DIR takes a recorded run's decisions instead of measuring, and
// then runs bitwise the same (its lock-step profiling window and its trial's windows included).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "base/error.h"
#include "core/sync/policies/dreamddp.h"
#include "core/sync/policy/registry.h"
#include "core/sync/schedule/schedule_bound.h"
#include "core/sync/schedule/schedule_choice.h"
#include "core/sync/schedule/schedule_solver.h"

namespace dd::sync {

DreamDdpPolicy::DreamDdpPolicy(const PolicySpec& s)
    : h_(int(s.get_int("h", 8, 1, kMaxPhases))), merge_(parse_merge(s, "dreamddp", h_)), delay_(merge_.delay),
      fillin_(s.get_bool("fillin", default_fillin())), profile_dir_(s.get_str("profile", "")),
      replay_dir_(s.get_str("replay", "")), profile_steps_(s.get_int("profile_steps", 6, 2, 10000)),
      fallback_(s.get_bool("fallback", true)), trial_(false) {
  s.allow_only_with_merge_keys({"h", "fillin", "profile", "profile_steps", "fallback", "trial", "replay", "lockstep"});
  const bool lockstep = s.get_bool("lockstep", false);
  set_merge(merge_);
  set_period(h_);
  caps_.profiled = this;
  caps_.trialled = this;
  caps_.reporting = this;
  caps_.checkpointed = this;
  if (!profile_dir_.empty() && !replay_dir_.empty())
    throw UsageError("--policy dreamddp: profile= and replay= cannot be combined (a replay takes the recorded "
                     "run's profile)");
  // Fill-in adds averages of a layer between its own: with a delay two of them could be in flight at once.
  if (delay_ > 0 && fillin_)
    throw UsageError("--policy dreamddp: delay=" + std::to_string(delay_) + " and fill-in cannot be combined (two "
                     "averages of one layer would be in flight); drop fillin=1 (fill-in is off by default with a delay)");
  if (!profile_dir_.empty()) {
    file_profile_ = read_profile(profile_dir_);
    // The note is one line: a run builds this policy several times (checks, the timed window, the engine, a
    // switch), so it is printed by the first only, and by one rank (rank 0, or the one process).
    static std::mutex m;  // ranks may be threads of one process (tests)
    static std::set<std::string> noted;
    const char* rank = std::getenv("RANK");
    const std::lock_guard<std::mutex> lock(m);
    if (!file_profile_.bp_nan.empty() && noted.insert(profile_dir_).second && (!rank || std::string(rank) == "0"))
      std::fprintf(stderr, "%s\n", bp_nan_note(file_profile_, profile_dir_).c_str());
  }
  if (!replay_dir_.empty()) load_replay();
  observe_ = replay_ ? replay_->observed : !lockstep && default_observe();
  if (lockstep && !default_observe())
    throw UsageError("--policy dreamddp: lockstep=1 is for a self-profiled schedule (profile= and replay= take "
                     "theirs from a file or a recorded run)");
  trial_ = s.get_bool("trial", default_trial());
}

std::string DreamDdpPolicy::describe() const {
  const bool lockstep = !observe_ && default_observe();
  return "dreamddp:h=" + std::to_string(h_) + (lockstep ? ",lockstep=1" : "") +
         (fillin_ == default_fillin() ? "" : fillin_ ? ",fillin=1" : ",fillin=0") +
         (fallback_ ? "" : ",fallback=0") + (trial_ == default_trial() ? "" : trial_ ? ",trial=1" : ",trial=0") +
         merge_.describe() + (profile_dir_.empty() ? "" : ",profile=" + profile_dir_) +
         (replay_dir_.empty() ? "" : ",replay=" + replay_dir_);
}

void DreamDdpPolicy::setup(const std::vector<LayerMeta>& layers, int world) {
  Policy::setup(layers, world);
  setup_default_plan();
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

void DreamDdpPolicy::on_profile(const LayerTimes& measured) {
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
  std::vector<int64_t> bytes;
  for (auto& m : layers_) bytes.push_back(m.bytes);
  const auto choice = choose_in_step(t.backward_s, t.comm_s, h_, phase_, fillin_,
                                     merge_.transforms() ? Contention{} : t.contention, bytes);
  fused_ = choice;
  phase_ = choice.phase;
  if (fillin_) extra_ = choice.fill;
  modelled_ = choice.layerwise_s;
  localsgd_modelled_ = choice.localsgd_s;
  local_sgd_ = fallback_ && choice.local_sgd;
  model_local_sgd_ = local_sgd_;
  // Where the model is known to see only part of the cost, within kTrialMargin of each other the two schedules
  // are measured instead, 2 periods each (layer-wise, Local SGD, Local SGD, layer-wise), and the faster one runs:
  // - contention above the probe's noise: the model misses ranks waiting for each other at every collective, on
  //   cores their peers' communication threads also use;
  // - the fused-bucket model chose (a latency that dominates small layers): a straight line through the profile
  //   stands in for the ring cost of every bucket size;
  // - the profile was recorded from ordinary steps (the default start): their times carry the contention of
  //   overlapped steps, so the model prices Local SGD's blocking average, which overlaps nothing, at that cost too.
  const bool model_blind = observe_ || contended(t.contention) || choice.fused_plsgd;
  trial_pending_ = fallback_ && trial_ && model_blind && !merge_.transforms() &&
                   std::abs(choice.layerwise_s - choice.localsgd_s) <= kTrialMargin * choice.localsgd_s;
  trial_start_ = -1;
  trial_layerwise_s_ = trial_local_s_ = 0;
  if (replay_) {  // the recorded schedule and trial, as they ran (a solver change cannot alter a replay)
    phase_ = replay_->phase;
    extra_ = replay_->fill;
    fused_.fused_plsgd = false;
    local_sgd_ = model_local_sgd_ = replay_->model_local_sgd;
    trial_pending_ = replay_->trial;
  }
}

Action DreamDdpPolicy::decide(int layer, int64_t step) const {
  if (!solved_at(step)) return int(step % h_) == default_phase_[size_t(layer)] ? Action::AverageParams : Action::None;
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

namespace {

const bool registered = register_policy("dreamddp", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<DreamDdpPolicy>(s);
});

}  // namespace

}  // namespace dd::sync
