// The sync engine's step as the training loop sees it (docs/design.md "One training step"): a protocol of five
// calls (SyncEngine). What lies outside a step is in small parts of their own (sync_session.h). Implemented by
// LayerSync (layer_sync.h), built by make_layer_sync (make_layer_sync.h).
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

// What the ranks agreed at the start of a step: how many saw an anomaly, and at which step they saw it (the flag
// travels in the control all-reduce and is applied one step later, two when it travels alone).
struct StepStart {
  int anomalies = 0;
  int64_t anomaly_step = -1;
};

// This rank's report at the end of a step.
struct StepEnd {
  bool anomaly = false;  // a local anomaly (non-finite gradient or loss, a loss spike): rides in the control votes
};

// The updates of a step, as the engine allows them (finalize_backward).
class LayerUpdates {
 public:
  virtual ~LayerUpdates() = default;
  // Deferred updates: every collective the step's updates need has ended, no layer is updated yet.
  virtual void synced() {}
  // Layer l may be updated now, at the learning rate times lr_factor (staleness scaling gamma^stale; 1 when off).
  virtual void update(int layer, float lr_factor) = 0;
};

// The step, shaped like PyTorch's Reducer: begin() opens the step and returns what the ranks agreed;
// prepare_for_backward() marks the origin of the backward's timeline; the model's backward calls
// on_layer_ready(l) (nn::BackwardHook) as each layer's gradient is final, which launches its bucket when due;
// finalize_backward() hands the layers to the updates as they may be updated; end() closes the step with this
// rank's report and returns its communication.
class SyncEngine : public nn::BackwardHook {
 public:
  virtual StepStart begin(int64_t step) = 0;
  virtual void prepare_for_backward() = 0;
  // immediate: each layer as soon as it may be updated (layers that do not sync this step at once, synced layers as
  // their bucket completes, in launch order), overlapping the optimizer with the communication still in flight;
  // otherwise synced() once every collective has ended, then every layer from the last down.
  virtual void finalize_backward(LayerUpdates& updates, bool immediate) = 0;
  // After the updates (e.g. the blocking whole-model averaging of plain Local SGD, the control votes).
  virtual StepCommStats end(const StepEnd& report) = 0;
  virtual ~SyncEngine() = default;
};

}  // namespace dd::sync
