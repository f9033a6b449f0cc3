// Launches: this step's buckets and their collectives in flight (one part of LayerSync, layer_sync.h). The plan's
// buckets, which layer triggers each, the ones launched so far (always in plan order: the consistency rule), the
// collectives in flight, and each layer's ready time on the backward's timeline.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "core/sync/engine/copy_average.h"
#include "core/sync/profile/self_profile.h"
#include "core/sync/types/bucket_plan.h"

namespace dd::sync {

// A bucket's collectives in flight this step.
struct InFlight {
  Bucket bucket;
  std::vector<WorkPtr> works;
  double launch_s;
  int64_t bytes = -1;  // bytes this rank contributed when not bucket.bytes() (a compressed payload)
  int record = -1;     // index into Launches::instep of a transformed average to finish when the works end
};

// Where a step's updates stand (LayerSync's ReadyLayers): the layers from the last down not guarded by a
// collective (immediate) or all of them (deferred), then, immediate only, each bucket's once its collectives end.
struct UpdateCursor {
  bool open = false, immediate = false;
  int layer = -1;       // the next layer of the first pass, from the last down (-1: the pass is over)
  size_t bucket = 0;    // the next entry of Launches::inflight to wait for
  int in_bucket = -1;   // the next layer of the bucket waited for last, from its hi down to its lo
  double waited = 0;    // seconds waited for the buckets so far
};

class Launches {
 public:
  explicit Launches(int layers) : trigger(size_t(layers), -1), ready(size_t(layers), 0.0) {}
  // Waits for the collectives still in flight (a step left by an exception, e.g. an agreed anomaly stop): they
  // write into the gradient arena and the copies' buffers, which are freed after this.
  ~Launches();
  Launches(const Launches&) = delete;
  Launches& operator=(const Launches&) = delete;
  // This step's buckets for `actions` (a small first bucket, then up to cap_bytes each); nothing launched yet.
  void plan(const std::vector<Action>& actions, const std::vector<LayerRange>& ranges, int64_t first_bytes,
            int64_t cap_bytes);
  // The bucket that layer l's readiness launches now, -1 for none; std::logic_error when it comes out of plan
  // order (a model that reports its layers out of backward order).
  int take(int l);
  // std::logic_error unless every planned bucket was launched (a model that forgot to report a layer).
  void check_all_launched(int64_t step) const;
  // The all-reduces of this step as the communication thread ran them, into the profile's comm record.
  void record_comm(SelfProfile& profile) const;

  std::vector<Bucket> buckets;
  std::vector<int> trigger;          // per layer: the bucket it launches, -1 for none
  std::vector<InFlight> inflight;    // launch order
  std::vector<CopyAverage> instep;   // this step's transformed in-step averages (InFlight::record)
  int launched = 0;
  std::vector<double> ready;         // per layer: when its gradient was final (now_s())
  double t_bwd = 0;                  // the origin of this step's backward timeline
  UpdateCursor cursor;               // the updates finalize_backward hands out
};

}  // namespace dd::sync
