// LayerSync, the engine behind make_layer_sync (internal to core/sync). One class over small parts, its member
// functions in one file per job:
//   layer_sync.cpp           the step: decide, plan buckets, launch them from the hook in order, wait, update
//   layer_sync_averages.cpp  blocking and delayed averages (Local SGD's, a switch's, a fallback's, the final one)
//   layer_sync_policy.cpp    the policy in force: switches (--switch, control file), fallback, the profile hand-off
//   layer_sync_votes.cpp     the control all-reduce: votes cast after the update, applied one or two steps later
//   layer_sync_state.cpp     the checkpoint of everything above
// and the parts it holds: Collectives (every collective, fingerprinted), CopyAverages + ParamMerge (averages on
// copies: delay=, outer=, compress=), ControlQueue (votes in flight), GradSignals, AutoCodecs, ControlFile,
// SelfProfile, SyncTelemetry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/sync/control/control_file.h"
#include "core/sync/control/control_votes.h"
#include "core/sync/control/grad_signals.h"
#include "core/sync/engine/collectives.h"
#include "core/sync/engine/copy_average.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/engine/sync_telemetry.h"
#include "core/sync/merge/auto_codec.h"
#include "core/sync/merge/param_merge.h"
#include "core/sync/policy/registry.h"
#include "core/sync/profile/self_profile.h"
#include "core/sync/types/bucket_plan.h"
#include "core/sync/types/data_path.h"

namespace dd::sync {

// A bucket's collectives in flight this step.
struct InFlight {
  Bucket bucket;
  std::vector<WorkPtr> works;
  double launch_s;
  int64_t bytes = -1;  // bytes this rank contributed when not bucket.bytes() (a compressed payload)
  int record = -1;     // index into LayerSync::instep_ of a transformed average to finish when the works end
};

class LayerSync : public SyncSession {
 public:
  LayerSync(const EngineOptions& o, const LayerTable& layers, const Arenas& a, std::unique_ptr<DataPath> dp,
            Backend& b);

  // SyncEngine (sync_engine.h). The step, in layer_sync.cpp:
  StepStart begin(int64_t step) override;
  void prepare_for_backward() override;
  void on_layer_ready(int l) override;
  void finalize_backward(LayerUpdates& updates, bool immediate) override;
  StepCommStats end(const StepEnd& report) override;
  // SyncSession:
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string policy_in_force() const override { return policy_spec_; }
  const std::vector<PolicyChange>& policy_changes() const override { return changes_; }
  float lr_factor(int l) const override;
  StepCommStats step_stats() const override { return coll_.stats(); }
  // layer_sync_averages.cpp:
  void finalize() override;
  void with_consensus(const std::function<void()>& fn) override;
  // layer_sync_policy.cpp:
  void fallback(int64_t steps) override;
  // layer_sync_state.cpp:
  std::string save_state() override;
  void load_state(const std::string& blob) override;

 private:
  // layer_sync.cpp
  void begin_step(int64_t step);
  void finish_backward();
  void finish_backward_and_update(const std::function<void(int)>& update);
  void after_update();
  void enter_lockstep(const std::vector<bool>& entering);
  void plan_launches();
  void check_all_launched() const;
  void end_of_backward(double t1);
  void record_comm();
  void launch(const Bucket& bk);
  void record_timeline(double t_end);
  void log_sync_event(const InFlight& f, double t_end, int64_t step, double t_bwd);
  Backend& group_of(const Bucket& bk) { return bk.action == Action::AverageGroup ? *intra_ : b_; }
  std::vector<bool> local_layers() const;  // the layers that are not lock-step (they differ across ranks)
  int num_layers() const { return int(meta_.size()); }
  // layer_sync_averages.cpp
  void periodic_average();
  void merge_delayed(bool all);
  void average_all(bool count_stats, bool log = false);
  void average_layers(const std::vector<bool>& which, bool optimizer_state, bool all_buffers, bool log = false);
  // layer_sync_policy.cpp
  void set_policy(const PolicySpec& spec);
  void switch_policy(const PolicySpec& spec, const std::string& why);
  void apply_switches();
  void print_plan_if_changed();
  void record_decisions();  // the policy's decisions() into metrics.h5's /decisions (rank 0)
  void finish_profile();
  void finish_observed();
  void take_carried_profile();
  void publish_profile(const LayerTimes& t);
  void time_periods(int64_t step);
  // The policy's plan and decisions (Reporting), "" and 0 without the capability.
  std::string policy_plan() const { return caps_.reporting ? caps_.reporting->plan() : std::string(); }
  int64_t policy_plan_version() const { return caps_.reporting ? caps_.reporting->plan_version() : 0; }
  // layer_sync_votes.cpp
  void cast_votes();
  void apply_agreed_votes(bool all = false);
  void apply_votes(const ControlVector& c);

  std::unique_ptr<DataPath> dp_;  // first member: outlives every in-flight Work that refers to it
  // With a delay: the control all-reduce's own channel (a split of b_), so it never queues behind averages that run
  // across steps on b_'s one FIFO communication thread. Declared early: outlives the control works in flight.
  std::unique_ptr<Backend> control_;
  EngineOptions o_;
  Arenas a_;
  Backend& b_;
  std::vector<LayerMeta> meta_;
  std::vector<LayerRange> ranges_;
  std::vector<std::string> hosts_;
  int64_t step_ = 0;
  double t_bwd_ = 0;

  // The policy in force and what it decided this step.
  std::vector<PolicySwitch> switches_;
  size_t next_switch_ = 0;
  std::unique_ptr<Policy> policy_;
  Capabilities caps_;          // policy_->caps(), read once by set_policy
  bool wants_signals_ = false;  // the policy reads local gradient statistics (Voting::wants_signals)
  std::vector<int64_t> period_steps_;  // the policy's timed_periods() and when each boundary was crossed here
  std::vector<double> period_t_;
  std::string policy_spec_;
  std::vector<PolicyChange> changes_;  // the switches so far (policy_changes)
  uint64_t generation_ = 0;  // bumped by every set_policy: votes cast under an earlier policy are not handed on
  int64_t plan_version_ = 0;
  MergeSpec merge_;
  std::unique_ptr<Backend> intra_;  // hier: this rank's group
  int group_ = 0;
  int64_t fallback_until_ = 0;
  std::vector<Action> actions_;
  std::vector<bool> lockstep_;
  std::vector<int64_t> stale_;
  std::vector<bool> delayed_now_;  // layers whose average of this step is delayed (updated locally now)

  // This step's buckets, launched from the hook in plan order.
  std::vector<Bucket> buckets_;
  std::vector<int> trigger_;
  std::vector<InFlight> inflight_;
  std::vector<CopyAverage> instep_;  // this step's transformed in-step averages (InFlight::record)
  int launched_ = 0;
  std::vector<double> ready_;

  // Votes and what rides with them.
  ControlQueue controls_;
  ControlLayout layout_;
  FloatBuffer votes_;
  size_t policy_votes_ = 0;
  int vote_lag_ = 1;
  ControlFile control_file_;
  bool local_anomaly_ = false;
  int agreed_anomalies_ = 0;
  int64_t agreed_anomaly_step_ = -1;
  GradSignals signals_;

  SelfProfile profile_;
  SyncTelemetry telemetry_;
  AutoCodecs auto_;
  ParamMerge pm_;
  Collectives coll_;
  CopyAverages copies_;  // last: its destructor waits for the deferred averages' collectives
};

}  // namespace dd::sync
