// The optional capabilities of a policy (policy.h): what a policy takes on only when it needs it. A policy
// implements the interface and names itself in its Capabilities (Policy::caps()); the engine reads them once,
// whenever a policy comes into force, and asks nothing of a policy that does not have the capability.
// A composite (StalenessCap) names the capabilities of the policy it wraps, or its own forwarding ones.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/layer_signals.h"
#include "core/sync/types/layer_times.h"

namespace dd::sync {

// Policies that schedule from a profile ask for one during their first profile_steps() steps from first_step()
// (lock-step meanwhile), or during their first observe_steps() steps, which run the policy's own decisions and are
// only recorded (ready times, and each bucket's bytes and time on the communication thread); 0 once they have one.
// At the end of either window the engine hands them the profile agreed over the ranks.
class Profiled {
 public:
  virtual int64_t profile_steps() const = 0;
  virtual int64_t observe_steps() const { return 0; }
  virtual void on_profile(const LayerTimes& t) = 0;

 protected:
  ~Profiled() = default;
};

// Consensus (docs/design.md, consistency rule). A policy that decides from local statistics publishes
// votes_per_layer() floats per layer after each backward (cast_votes); the engine sums them over the ranks with
// one small asynchronous all-reduce and hands the sums to on_agreed() before the next step's decide() calls:
// every rank then decides from the same numbers, one step later, without stalling compute.
class Voting {
 public:
  virtual int votes_per_layer() const = 0;
  // Whether the engine takes each layer's gradient signals for it (GradSignals, on the gradients' device).
  virtual bool wants_signals() const { return votes_per_layer() > 0; }
  virtual void cast_votes(int64_t step, const LayerSignals& s, float* votes) = 0;
  virtual void on_agreed(int64_t step, const float* vote_sums, int world) = 0;

 protected:
  ~Voting() = default;
};

// Measured trials: step boundaries s_0 < s_1 < ... < s_n whose wall times the engine measures (window i = steps
// [s_i, s_{i+1}), forward to the end of its averages). At the start of step s_n, before its decide() calls, the
// engine hands the rank-averaged seconds of every window to on_period_times, identical on every rank, or an
// empty vector where it missed a boundary (a resume inside the trial). Empty: nothing to time.
class Trialled {
 public:
  virtual std::vector<int64_t> timed_periods() const = 0;
  virtual void on_period_times(int64_t step, const std::vector<double>& seconds) = 0;
  // The step from which no trial changes the schedule any more, for a run whose profiling ends at `from`
  // (Policy::settled_by): `from` where no trial may come.
  virtual int64_t settled_after(int64_t from) const { return from; }

 protected:
  ~Trialled() = default;
};

// What rank 0 prints and metrics.h5 records of a policy: a human-readable plan, printed at start and again
// whenever plan_version() changes (e.g. after a policy finished measuring and assigned its schedule), and what it
// decided from a measurement (a self-profile, a trial) as one JSON object for /decisions (docs/design.md, HDF5),
// "" when nothing it does depends on one. The engine records it when the policy comes into force and whenever
// plan_version() changes.
class Reporting {
 public:
  virtual std::string plan() const = 0;
  virtual int64_t plan_version() const { return 0; }
  virtual std::string decisions() const { return ""; }

 protected:
  ~Reporting() = default;
};

// Everything decide() depends on beyond the spec and setup() (schedules, EMAs, counters), for checkpoints.
// Restoring it must make the policy decide exactly as the saved one would have.
class Checkpointed {
 public:
  virtual std::string save_state() const = 0;
  virtual void load_state(const std::string& s) = 0;

 protected:
  ~Checkpointed() = default;
};

// Two-level topology: the group of every rank (hosts[r] is rank r's host name); ranks of one group run
// Action::AverageGroup among themselves on their own sub-group backend. Empty: no groups.
class Grouped {
 public:
  virtual std::vector<int> groups(const std::vector<std::string>& hosts) const = 0;

 protected:
  ~Grouped() = default;
};

// The capabilities a policy has: each points into the policy (or, for a composite, into the policy it wraps),
// or is null. Filled by the policy's constructor and fixed from then on.
struct Capabilities {
  Profiled* profiled = nullptr;
  Voting* voting = nullptr;
  Trialled* trialled = nullptr;
  Reporting* reporting = nullptr;
  Checkpointed* checkpointed = nullptr;
  Grouped* grouped = nullptr;
};

}  // namespace dd::sync
