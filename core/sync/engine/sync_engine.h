// The sync engine as the training loop sees it (docs/design.md "One training step"): a backward hook plus the calls
// around the optimizer update. Implemented by LayerSync (layer_sync.h), built by make_layer_sync (make_layer_sync.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/nn/layer.h"

namespace dd::sync {

struct StepCommStats {
  double exposed_ms = 0;   // time the compute thread waited for communication this step
  double comm_ms = 0;      // total time collectives were in flight (launch -> end, union)
  int64_t bytes = 0;       // payload bytes this rank contributed to collectives this step
  int collectives = 0;
};

class SyncEngine : public nn::BackwardHook {
 public:
  virtual void begin_step(int64_t step) = 0;
  // Right before the model's backward: the origin of this step's timeline.
  virtual void begin_backward() = 0;
  // nn::BackwardHook::on_layer_ready(int) is called from the model's backward.
  // Waits for every collective whose result an update of this step needs.
  virtual void finish_backward() = 0;
  // Per-layer immediate update: calls update(l) for every layer as soon as layer l may be updated — layers that do
  // not sync this step at once, synced layers as their bucket completes (in launch order) — overlapping the
  // optimizer with the communication still in flight. Replaces finish_backward() + a loop of updates.
  virtual void finish_backward_and_update(const std::function<void(int)>& update) = 0;
  // Learning-rate factor of layer l this step (staleness scaling gamma^stale; 1 when off).
  virtual float lr_factor(int layer) const = 0;
  // After the optimizer update (e.g. the blocking whole-model averaging of plain Local SGD).
  virtual void after_update() = 0;
  // End of training: average every local layer once so all ranks hold the same model.
  virtual void finalize() = 0;
  virtual StepCommStats step_stats() const = 0;
  // Host name of every rank, by rank (gathered once at construction; hier policies group ranks by it).
  virtual const std::vector<std::string>& hosts() const = 0;
  // Runs fn with the model's parameters and buffers replaced by their rank average (the consensus model that
  // evaluation and users see), then restores the training state bit for bit. Collective: all ranks call it.
  virtual void with_consensus(const std::function<void()>& fn) = 0;
  // Anomaly guard (docs/design.md consistency rule): a rank reports a local anomaly after its backward; the flag
  // travels in the control all-reduce and agreed_anomalies() tells every rank, one step later (two when the flag
  // travels alone, see LayerSync::set_policy), how many ranks
  // saw one. fallback(W) averages every local layer once, then runs all layers lock-step for W steps.
  virtual void report_anomaly() = 0;
  virtual int agreed_anomalies() const = 0;
  // The step at which the ranks counted by agreed_anomalies() saw them (the flag is applied one or two steps late).
  virtual int64_t agreed_anomaly_step() const = 0;
  virtual void fallback(int64_t steps) = 0;
  // Checkpoint support: the engine's and its policy's state after a completed step (waits for pending
  // control votes). load_state is collective when the saved policy differs from the constructed one.
  virtual std::string save_state() = 0;
  virtual void load_state(const std::string& s) = 0;
  virtual ~SyncEngine() = default;
};

}  // namespace dd::sync
