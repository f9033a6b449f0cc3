// The sync engine outside a step (docs/design.md "One training step"): small parts, each asked for by name by the
// code that needs it, and SyncSession, the owner that holds the engine and hands out the step (SyncEngine,
// sync_engine.h) and these parts. Implemented by LayerSync (layer_sync.h), built by make_layer_sync.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/sync/engine/sync_engine.h"

namespace dd::sync {

// The run around the steps: the calls a trainer makes between steps. Collective: all ranks make them at the same
// step.
class RunControl {
 public:
  virtual ~RunControl() = default;
  // After an agreed anomaly (docs/design.md consistency rule): average every local layer once, then run all layers
  // lock-step for `steps` steps.
  virtual void fallback(int64_t steps) = 0;
  // End of training: average every local layer once so all ranks hold the same model.
  virtual void finalize() = 0;
  // Runs fn with the model's parameters and buffers replaced by their rank average (the consensus model that
  // evaluation and users see), then restores the training state bit for bit.
  virtual void with_consensus(const std::function<void()>& fn) = 0;
};

// Checkpoint support: the engine's and its policy's state after a completed step (waits for pending control
// votes). load_state is collective when the saved policy differs from the constructed one.
class EngineState {
 public:
  virtual ~EngineState() = default;
  virtual std::string save_state() = 0;
  virtual void load_state(const std::string& s) = 0;
};

// A change of policy during a run: from `step` on, `spec`, requested by `source` ("--switch" or "control file").
struct PolicyChange {
  int64_t step;
  std::string spec;
  std::string source;
};

// What a run's record says of the engine (summary.json, metrics.h5's root attributes).
class PolicyRecord {
 public:
  virtual ~PolicyRecord() = default;
  // The spec of the policy in force now (after the switches so far), and those switches, oldest first (kept in
  // checkpoints, so a resumed run lists those made before it too).
  virtual std::string policy_in_force() const = 0;
  virtual const std::vector<PolicyChange>& policy_changes() const = 0;
  // Host name of every rank, by rank (gathered once at construction; hier policies group ranks by it).
  virtual const std::vector<std::string>& hosts() const = 0;
};

// What tests and tools read of a step.
class StepProbe {
 public:
  virtual ~StepProbe() = default;
  // Layer l's learning-rate factor this step, as finalize_backward hands it out.
  virtual float lr_factor(int layer) const = 0;
  // This step's communication so far (what end() returns).
  virtual StepCommStats step_stats() const = 0;
  // Per layer: lock-step this step (identical on every rank, gradients averaged before the update).
  virtual std::vector<bool> lockstep_layers() const = 0;
};

// A run's engine as its owner holds it: the step protocol and each part outside the step, by name (the training
// loop runs `step`, the checkpoint code sees `state`, evaluation `control`, and so on).
class SyncSession {
 public:
  template <typename Engine>
  explicit SyncSession(std::unique_ptr<Engine> e)
      : step(*e), control(*e), state(*e), record(*e), probe(*e), engine_(std::move(e)) {}
  SyncEngine& step;
  RunControl& control;
  EngineState& state;
  PolicyRecord& record;
  StepProbe& probe;

 private:
  std::unique_ptr<SyncEngine> engine_;
};

}  // namespace dd::sync
