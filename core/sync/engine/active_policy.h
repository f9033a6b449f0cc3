// ActivePolicy: the policy in force (one part of LayerSync, layer_sync.h): the policy and its capabilities, the
// switches still to come and those made, the merge keys it asks for, hier's sub-group, the plan last printed, and
// the timed periods of a measured trial.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/sync/engine/sync_session.h"
#include "core/sync/policy/registry.h"
#include "core/sync/types/bucket_plan.h"

namespace dd::sync {

struct ActivePolicy {
  explicit ActivePolicy(std::vector<PolicySwitch> switches) : switches(std::move(switches)) {}
  // The policy's plan and decisions (Reporting), "" and 0 without the capability.
  std::string plan() const { return caps.reporting ? caps.reporting->plan() : std::string(); }
  int64_t reported_version() const { return caps.reporting ? caps.reporting->plan_version() : 0; }
  // The backend a bucket's collectives run on: hier's sub-group for AverageGroup, else the world.
  Backend& group_of(const Bucket& bk, Backend& world) { return bk.action == Action::AverageGroup ? *intra : world; }

  std::vector<PolicySwitch> switches;  // --switch values, by step
  size_t next_switch = 0;
  std::unique_ptr<Policy> policy;
  Capabilities caps;                   // policy->caps(), read once when set
  bool wants_signals = false;          // the policy reads local gradient statistics (Voting::wants_signals)
  std::string spec;
  std::vector<PolicyChange> changes;   // the switches so far (policy_changes)
  uint64_t generation = 0;             // bumped by every set: votes cast under an earlier policy are not handed on
  int64_t plan_version = 0;            // the plan's version last printed and recorded
  MergeSpec merge;
  std::unique_ptr<Backend> intra;      // hier: this rank's group
  int group = 0;
  std::vector<std::string> hosts;      // host name of every rank, by rank (hier groups by it)
  std::vector<int64_t> period_steps;   // the policy's timed_periods() and when each boundary was crossed here
  std::vector<double> period_t;
};

}  // namespace dd::sync
