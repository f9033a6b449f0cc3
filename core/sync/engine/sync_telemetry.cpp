// SyncTelemetry: /layer_ready and /sync_events rows of the sync engine (sync_telemetry.h).
#include "core/sync/engine/sync_telemetry.h"

#include <algorithm>

#include "core/telemetry/metrics_writer.h"

namespace dd::sync {

void SyncTelemetry::layer_ready(int64_t step, const std::vector<double>& ready, double t_bwd) {
  // Per-layer ready times are L rows per step: every 10th step is plenty for timelines and profiles.
  if (!w_ || step % 10 != 0) return;
  for (int l = int(ready.size()) - 1; l >= 0; --l)
    w_->append_layer_ready({step, int32_t(rank_), int32_t(l), ready[size_t(l)] - t_bwd});
}

void SyncTelemetry::bucket(int64_t step, const Bucket& b, const std::vector<WorkPtr>& works, int64_t bytes,
                           double launch_s, double t_end, double t_bwd, int group) {
  if (!w_) return;
  double end = 0;
  for (auto& w : works)
    if (w) end = std::max(end, w->end_time());
  if (end <= 0) end = t_end;
  telemetry::SyncEventRow r;
  r.step = step;
  r.first_layer = b.lo;
  r.last_layer = b.hi;
  r.action = b.action == Action::AllreduceGrads ? telemetry::SyncAction::kAllreduceGrads
                                                : telemetry::SyncAction::kAverageParams;
  r.group = b.action == Action::AverageGroup ? group : 0;
  r.rank = rank_;
  r.bytes = bytes >= 0 ? bytes : b.bytes();
  r.launch_s = launch_s - t_bwd;
  r.end_s = end - t_bwd;
  w_->append_sync_event(r);
}

}  // namespace dd::sync
