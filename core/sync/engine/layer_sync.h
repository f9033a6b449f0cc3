// LayerSync, the engine behind make_layer_sync (internal to core/sync): one class over parts with one job each,
// its member functions in one file per job:
//   layer_sync.cpp           the step: decide, plan buckets, launch them from the hook in order, end the step
//   layer_sync_updates.cpp   the wait and the hand-out of the layers to update (ReadyLayers), in their order
//   layer_sync_averages.cpp  blocking and delayed averages (Local SGD's, a switch's, a fallback's, the final one)
//   layer_sync_policy.cpp    the policy in force: switches (--switch, control file), fallback, the profile hand-off
//   layer_sync_votes.cpp     the control all-reduce: votes cast after the update, applied one or two steps later
//   layer_sync_state.cpp     the checkpoint of everything above
// and the parts it holds, each in a header of its own: ActivePolicy (the policy in force), LayerPlan (what each
// layer does this step), Launches (this step's buckets and their collectives in flight), VoteBox (the control
// all-reduce and what rides in it), Collectives (every collective, fingerprinted), CopyAverages + ParamMerge
// (averages on copies: delay=, outer=, compress=), AutoCodecs, SelfProfile, SyncTelemetry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/sync/engine/active_policy.h"
#include "core/sync/engine/collectives.h"
#include "core/sync/engine/copy_average.h"
#include "core/sync/engine/launches.h"
#include "core/sync/engine/layer_plan.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/engine/sync_telemetry.h"
#include "core/sync/engine/vote_box.h"
#include "core/sync/merge/auto_codec.h"
#include "core/sync/merge/param_merge.h"
#include "core/sync/profile/self_profile.h"
#include "core/sync/types/bucket_plan.h"
#include "core/sync/types/data_path.h"

namespace dd::sync {

class LayerSync final : public SyncEngine, public RunControl, public EngineState, public PolicyRecord,
                        public StepProbe, private ReadyLayers {
 public:
  LayerSync(const EngineOptions& o, const LayerTable& layers, const Arenas& a, std::unique_ptr<DataPath> dp,
            Backend& b);

  // SyncEngine (sync_engine.h). The step, in layer_sync.cpp and layer_sync_updates.cpp:
  StepStart begin(int64_t step) override;
  void prepare_for_backward() override;
  void on_layer_ready(int l) override;
  ReadyLayers& finalize_backward(bool immediate) override;
  StepCommStats end(const StepEnd& report) override;
  // PolicyRecord and StepProbe (sync_session.h):
  const std::vector<std::string>& hosts() const override { return policy_.hosts; }
  std::string policy_in_force() const override { return policy_.spec; }
  const std::vector<PolicyChange>& policy_changes() const override { return policy_.changes; }
  float lr_factor(int l) const override;
  StepCommStats step_stats() const override { return coll_.stats(); }
  std::vector<bool> lockstep_layers() const override { return plan_.lockstep; }
  // RunControl, in layer_sync_averages.cpp:
  void finalize() override;
  void with_consensus(const std::function<void()>& fn) override;
  // RunControl, in layer_sync_policy.cpp:
  void fallback(int64_t steps) override;
  // EngineState, in layer_sync_state.cpp:
  std::string save_state() override;
  void load_state(const std::string& blob) override;

 private:
  // layer_sync.cpp
  void begin_step(int64_t step);
  void after_update();
  void enter_lockstep(const std::vector<bool>& entering);
  void plan_launches();
  bool in_closing_period(int64_t step) const;
  bool closing_at(int64_t step) const;
  void end_of_backward(double t1);
  void launch(const Bucket& bk);
  void record_timeline(double t_end);
  void log_sync_event(const InFlight& f, double t_end, int64_t step, double t_bwd);
  int num_layers() const { return layers_.size(); }
  // layer_sync_updates.cpp
  void finish_backward();
  std::optional<LayerUpdate> next() override;  // ReadyLayers: the update cursor (Launches::cursor)
  // layer_sync_averages.cpp
  void periodic_average();
  std::vector<CopyAverage> launch_local_copies(int64_t merge_step);
  void apply_copies(std::vector<CopyAverage>& sent, bool log);
  void closing_merge();
  void merge_delayed(bool all);
  void average_all(bool count_stats, bool log = false);
  void average_differing();
  bool start_equal_everywhere();
  // Buffers: with each layer's parameters, all of them in one collective, or none.
  enum class BufferAverage { PerLayer, All, None };
  void average_layers(const std::vector<bool>& which, bool optimizer_state, BufferAverage buf, bool log = false);
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
  // layer_sync_votes.cpp
  void cast_votes();
  void apply_agreed_votes(bool all = false);
  void apply_votes(const ControlVector& c);

  std::unique_ptr<DataPath> dp_;  // first member: outlives every in-flight Work that refers to it
  EngineOptions o_;
  Arenas a_;
  Backend& b_;
  LayerTable layers_;
  int64_t step_ = 0;
  ActivePolicy policy_;  // before the parts whose collectives run on its sub-group: outlives them
  LayerPlan plan_;
  Launches launches_;
  VoteBox votes_;
  SelfProfile profile_;
  SyncTelemetry telemetry_;
  AutoCodecs auto_;
  ParamMerge pm_;
  Collectives coll_;
  CopyAverages copies_;  // last: its destructor waits for the deferred averages' collectives
};

}  // namespace dd::sync
