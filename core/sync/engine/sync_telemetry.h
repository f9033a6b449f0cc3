// The sync engine's rows in metrics.h5 (docs/design.md, HDF5 schema): per-layer ready times of every 10th step
// (/layer_ready) and one /sync_events row per bucket once its collectives completed, with times relative to the
// start of the backward of the step the bucket was launched in. Rank 0 only (the engine gets no writer elsewhere).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "core/sync/types/bucket_plan.h"

namespace dd::telemetry {
class MetricsWriter;
}

namespace dd::sync {

class SyncTelemetry {
 public:
  SyncTelemetry(telemetry::MetricsWriter* w, int rank) : w_(w), rank_(rank) {}
  bool on() const { return w_ != nullptr; }
  void layer_ready(int64_t step, const std::vector<double>& ready, double t_bwd);
  // `bytes` < 0: the bucket's float32 bytes; `t_end` when the backend reports no end times; `group` > 0 for a
  // sub-group average (1 + this rank's group).
  void bucket(int64_t step, const Bucket& b, const std::vector<WorkPtr>& works, int64_t bytes, double launch_s,
              double t_end, double t_bwd, int group);

 private:
  telemetry::MetricsWriter* w_;
  int rank_;
};

}  // namespace dd::sync
