// The layer-sensitivity probe (docs/design.md "HDF5 schema", /sensitivity): how fast each layer's gradient goes stale.
// At probe step t0 every rank computes each layer's gradient on a fixed probe batch; at t0+d (d in delays) it
// computes it again on the same batch and records cos(g_l(t0), g_l(t0+d)), mean over ranks. probe=minibatch
// compares the training minibatches' gradients instead (sampling noise included). Probing never touches the
// training trajectory: its gradients are discarded and BatchNorm buffers restored.
// The fixed probe batch: `batch` training samples drawn once from their own seed stream (seed ^ 0x5E15), the same
// on every rank and at every probe. docs/design.md calls them "set aside"; they are held fixed but stay in the training
// stream, because removing them from training would change the trajectory that probing must leave untouched
// (the stronger of the two rules; ctest -R ProbeDoesNotChangeTheTrajectory proves it bit for bit).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/models/model.h"

namespace dd {
class Backend;
namespace telemetry {
class MetricsWriter;
}
}  // namespace dd

namespace dd::train {

struct SensitivityConfig {
  bool on = false;
  std::vector<int> delays{1, 2, 4, 8};
  int64_t every = 0;        // steps between probe starts (0: automatic, steps/8, at least max delay + 1)
  int64_t first = 0;        // first probe step
  bool minibatch = false;   // probe=minibatch
  int64_t batch = 1024;     // fixed probe batch size (training samples)
  std::vector<int64_t> probe_steps(int64_t steps) const;
};

// "on" or "delays=1,2,4,8,every=N,first=S,probe=fixed|minibatch,batch=B" (delays separated by '/' or ',' after
// delays=, e.g. delays=1/2/4/8 or delays=1,2,4,8,every=50). Throws dd::UsageError.
SensitivityConfig parse_sensitivity(const std::string& spec, int64_t steps);

class SensitivityProbe {
 public:
  SensitivityProbe(const SensitivityConfig& cfg, models::Model& m, const data::Dataset& train, uint64_t seed,
                   int64_t steps, Backend* b);
  ~SensitivityProbe();
  // Where the cosines go (rank 0's metrics file; null elsewhere): declares the probe's shape there and records
  // what a loaded state had already measured. Call once, before the first before_step.
  void attach(telemetry::MetricsWriter* w);
  // Called at the start of every training step, before its forward. `minibatch` is the step's training batch (on
  // the host; the probe puts what it uses in the model's memory). The probe runs on the model's device: its
  // gradients, the snapshot g(t0) and the cosines stay there, and only the cosines come back.
  void before_step(int64_t step, const data::Batch& minibatch);
  // Checkpoint support (state after a completed step): the open probe's t0, this rank's g_l(t0) and the cosines
  // measured so far, so a resumed run finishes it exactly as the uninterrupted run would. load_state (before
  // attach) ignores a state saved under another probe configuration and throws on a malformed one; attach then
  // records the measured cosines again (rank 0's metrics file dropped the unfinished probe when it was imported).
  std::string save_state() const;
  void load_state(const std::string& state);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dd::train
