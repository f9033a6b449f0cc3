// The sync engine's step as the training loop sees it (docs/design.md "One training step"): a protocol of five
// calls (SyncEngine). What lies outside a step is in small parts of their own (sync_session.h). Implemented by
// LayerSync (layer_sync.h), built by make_layer_sync (make_layer_sync.h).
#pragma once
#include <cstdint>
#include <optional>
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

// A layer that may be updated now, at the learning rate times lr_factor (staleness scaling gamma^stale; 1 when off).
struct LayerUpdate {
  int layer;
  float lr_factor;
};

// The layers of a step in the order they may be updated (finalize_backward): next() hands out the next one, after
// waiting for the collectives of the bucket that guards it; std::nullopt once every layer was handed out (the
// backward's timeline is then recorded). The caller takes them all before end().
class ReadyLayers {
 public:
  virtual std::optional<LayerUpdate> next() = 0;

 protected:
  ~ReadyLayers() = default;
};

// The step, shaped like PyTorch's Reducer: begin() opens the step and returns what the ranks agreed;
// prepare_for_backward() marks the origin of the backward's timeline; the model's backward calls
// on_layer_ready(l) (nn::BackwardHook) as each layer's gradient is final, which launches its bucket when due;
// finalize_backward() returns the layers in the order they may be updated, which the caller updates as it takes
// them; end() closes the step with this rank's report and returns its communication. No call goes back into the
// caller: the engine hands out, the trainer updates.
class SyncEngine : public nn::BackwardHook {
 public:
  virtual StepStart begin(int64_t step) = 0;
  virtual void prepare_for_backward() = 0;
  // immediate: each layer as soon as it may be updated (layers that do not sync this step at once, synced layers as
  // their bucket completes, in launch order), overlapping the optimizer with the communication still in flight;
  // otherwise every collective has ended when it returns (the deferred update's synced point), and the layers
  // come from the last down.
  virtual ReadyLayers& finalize_backward(bool immediate) = 0;
  // After the updates (e.g. the blocking whole-model averaging of plain Local SGD, the control votes).
  virtual StepCommStats end(const StepEnd& report) = 0;
  virtual ~SyncEngine() = default;
};

}  // namespace dd::sync
