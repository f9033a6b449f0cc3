// VoteBox: the control all-reduce and what rides in it (one part of LayerSync, layer_sync.h; docs/design.md
// consistency rule): the vector's layout (the policy's votes, the control-file switch request, the anomaly flag,
// compress=auto's cosines), the votes in flight, the lag at which their sums are applied, and the anomalies the
// ranks agreed on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "core/sync/control/control_file.h"
#include "core/sync/control/control_votes.h"
#include "core/sync/control/grad_signals.h"

namespace dd::sync {

class VoteBox {
 public:
  VoteBox(const std::string& control_file, const SpecCheck& check, bool anomaly_votes)
      : file(control_file, check), anomaly_votes(anomaly_votes) {}
  // The layout for a policy that casts `policy_votes` floats and compress=auto's `auto_votes` cosines: the
  // policy's votes, then [control-file switch request, anomaly flag] when those are on, then the cosines.
  void configure(size_t policy_votes, size_t auto_votes) {
    this->policy_votes = policy_votes;
    layout = {policy_votes, file.on(), anomaly_votes, auto_votes};
    votes.resize(layout.size());
    // When the control vector carries only the anomaly flag, nothing decides from it in the next step: it is
    // applied two steps late, so its all-reduce hides behind a whole step instead of making every step wait for the
    // slowest rank (a per-step rendezvous that cost 2-3 ms a step on the emulated 1 Gbit/s cluster). Policy votes
    // and control-file requests keep the one-step lag of docs/design.md.
    lag = (policy_votes == 0 && !file.on()) ? 2 : 1;
  }

  // With a delay: the control all-reduce's own channel (a split of the world), so it never queues behind averages
  // that run across steps on the world's one FIFO communication thread. Declared first: outlives the votes in flight.
  std::unique_ptr<Backend> channel;
  ControlQueue queue;
  ControlLayout layout;
  FloatBuffer votes;
  size_t policy_votes = 0;
  int lag = 1;
  ControlFile file;
  const bool anomaly_votes;
  bool local_anomaly = false;         // this rank's report of this step, cast after the update
  int agreed_anomalies = 0;           // the ranks that saw one, as agreed at the start of this step
  int64_t agreed_anomaly_step = -1;
  GradSignals signals;                // the local gradient statistics that policies and compress=auto read
};

}  // namespace dd::sync
