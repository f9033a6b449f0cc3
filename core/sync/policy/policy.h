// Policies: what each layer does at each step (docs/policies.md). A policy must decide from state that is
// identical on every rank (the step, the layer, agreed statistics), so all ranks launch the same collectives.
// The core interface below is what every policy has; what only some need (a profile, votes, a measured trial, a
// plan to print, a checkpoint, rank groups) is an optional capability (capabilities.h) named in caps().
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/capabilities.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/policy/merge_spec.h"
#include "core/sync/types/action.h"

namespace dd::sync {

class Policy {
 public:
  Policy() = default;
  Policy(const Policy&) = delete;  // caps() points into the object
  Policy& operator=(const Policy&) = delete;
  virtual ~Policy() = default;
  virtual std::string describe() const = 0;
  virtual void setup(const std::vector<LayerMeta>& layers, int world) { layers_ = layers; world_ = world; }
  // The action of `layer` at `step`: a function of rank-identical state only (the step, setup, agreed numbers, what
  // on_actions told it), so every rank launches the same collectives; const, so it may be asked any number of times.
  virtual Action decide(int layer, int64_t step) const = 0;
  // The actions the engine took at `step`, once per step the policy was asked (after every layer's decide(), before
  // the step's backward; not during lock-step profiling or a fallback). A policy whose decisions depend on its
  // past syncs (threshold, the staleness cap) updates that state here; a composite forwards the final actions to
  // the policy it wraps, so the wrapped one learns of syncs it did not decide.
  virtual void on_actions(int64_t step, const std::vector<Action>& actions) { (void)step; (void)actions; }
  // True when the whole model is averaged, blocking, after the update of `step` (plain Local SGD).
  virtual bool full_average_after(int64_t step) const { (void)step; return false; }
  // Called by the engine at the start of every step, before that step's decide() calls (after a switch, the new
  // policy's); a policy that places something relative to the current step anchors it here.
  virtual void on_step_begin(int64_t step) { (void)step; }
  // The first step this policy is in force: 0, or the step of a switch into it (--switch, the control file). Set by
  // the engine before that step's on_step_begin; windows a policy counts over its own first steps (profiling,
  // sensitivity measurement) count from here, never from step 0. A composite forwards it to the policy it wraps.
  virtual void start_at(int64_t step) { first_step_ = step; }

  // The optional capabilities this policy has (capabilities.h), fixed once it is constructed.
  const Capabilities& caps() const { return caps_; }
  // Steps in one period of this policy's schedule (its H or K), 0 if it has none: throughput is timed over whole
  // periods, so every timed window holds the same syncs whatever the step they fall in.
  int64_t period() const { return period_; }
  // How this policy's parameter averages are formed and merged (docs/design.md "Delayed merge, outer optimizer,
  // compression"): delay=T, outer=nesterov, compress=bf16|int8. The default is the plain in-step average.
  const MergeSpec& merge() const { return merge_; }
  int merge_delay() const { return merge_.delay; }
  int64_t first_step() const { return first_step_; }
  // The lock-step profiling window still asked for (Profiled::profile_steps), 0 without the capability.
  int64_t profile_window() const { return caps_.profiled ? caps_.profiled->profile_steps() : 0; }
  bool profiling(int64_t step) const { return step - first_step_ < profile_window(); }
  // The window of ordinary steps recorded for a profile (Profiled::observe_steps), 0 without the capability.
  int64_t observe_window() const { return caps_.profiled ? caps_.profiled->observe_steps() : 0; }
  bool observing(int64_t step) const { return step - first_step_ < observe_window(); }
  // For a run starting at `start`, the step from which this policy's schedule no longer changes by itself (after
  // profiling and a measured trial), at worst: throughput is timed from there.
  int64_t settled_by(int64_t start) const {
    const int64_t p = std::max(start, first_step_ + profile_window());
    return caps_.trialled ? caps_.trialled->settled_after(p) : p;
  }

 protected:
  // What a policy declares of itself in its constructor, from its spec.
  void set_period(int64_t steps) { period_ = steps; }
  void set_merge(const MergeSpec& m) { merge_ = m; }

  std::vector<LayerMeta> layers_;
  int world_ = 1;
  int64_t first_step_ = 0;
  Capabilities caps_;

 private:
  int64_t period_ = 0;
  MergeSpec merge_;
};

}  // namespace dd::sync
