// Averages on copies of their layers (docs/design.md "Delayed merge, outer optimizer, compression"): delay=T (the layers train on and take
// the correction avg(theta(t)) - theta(t) at step t + T) and transformed averages (outer=nesterov, compress=...;
// ParamMerge turns the average into the layer's new value). LayerSync decides when; this holds the copies, launches
// their collectives, applies them and keeps the delayed ones (with their checkpoint).
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "core/common/bytes.h"
#include "core/sync/engine/collectives.h"
#include "core/sync/engine/step_plan.h"
#include "core/sync/merge/param_merge.h"
#include "core/sync/types/bucket_plan.h"
#include "core/sync/types/data_path.h"

namespace dd::sync {

// The arena memory of one collective part.
float* arena_ptr(const Arenas& a, const BucketPart& p);

struct CopyAverage {
  Bucket bucket;
  int64_t step = 0, merge_step = 0;
  double launch_s = 0, t_bwd = 0;  // for its /sync_events row (relative to the backward of `step`)
  std::vector<BucketPart> parts;
  // theta(t) (delayed only) and, once its collectives end, its average; on the arenas' device
  std::vector<ops::DeviceFloats> orig, avg;
  // Compressed parts of arenas outside host memory: the payload, staged to the host where the codec runs; it is
  // copied back into avg when the collectives have ended (empty for every other part).
  std::vector<std::vector<float>> staged;
  std::vector<WorkPtr> works;
  bool transformed = false;  // the Params part goes through ParamMerge (avg holds its payload, then its result)
  int64_t bytes = -1;        // bytes this rank contributed when a part was compressed (else the bucket's)
};

class CopyAverages {
 public:
  // `codec`: each layer's codec (compress=auto changes it in place); `opt_slots`: optimizer-state slots averaged
  // with the parameters (--avg-optimizer-state), else 0.
  CopyAverages(Collectives& c, const Arenas& a, const std::vector<LayerRange>& ranges, ParamMerge& pm,
               const std::vector<Codec>& codec, int opt_slots)
      : c_(c), a_(a), ranges_(ranges), pm_(pm), codec_(codec), opt_slots_(opt_slots) {}
  ~CopyAverages();  // waits for what is in flight (never throws)

  CopyAverage launch(Backend& g, const Bucket& bk, int64_t step, int64_t merge_step, double t_bwd, int ready_layer);
  // The completed average becomes the layers' value: in-step, avg replaces them; delayed, the correction
  // avg - theta(t) is added to what they learnt since.
  void apply(CopyAverage& d, bool in_step);

  // delay=T: averages waiting for their merge step, oldest first.
  void defer(CopyAverage d) { delayed_.push_back(std::move(d)); }
  bool due(int64_t step, bool all) const { return !delayed_.empty() && (all || delayed_.front().merge_step <= step); }
  CopyAverage pop() {
    CopyAverage d = std::move(delayed_.front());
    delayed_.pop_front();
    return d;
  }
  void save(ByteWriter& w);  // waits for the deferred collectives, then their theta(t) and averages
  void load(ByteReader& r, int num_layers);

 private:
  Collectives& c_;
  Arenas a_;
  const std::vector<LayerRange>& ranges_;
  ParamMerge& pm_;
  const std::vector<Codec>& codec_;
  int opt_slots_;
  std::deque<CopyAverage> delayed_;
};

}  // namespace dd::sync
