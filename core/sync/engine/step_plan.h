// One step's launch plan, shared by the training engine (layer_sync.cpp) and the simulator (app/sim):
// the policy's per-layer actions, the lock-step transitions they cause, the buckets and which layer triggers each,
// and the collectives (arena ranges, in launch order) that one bucket issues.
#pragma once
#include <cstdint>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/types/bucket_plan.h"

namespace dd::sync {

// Decides step `step`: every layer AllreduceGrads when `lockstep_all` (profiling, fallback), else policy.decide(),
// an AverageParams left to the closing average when `closing` (closing_period.h) kept local, then reports the
// actions to the policy (Policy::on_actions).
// Updates `lockstep` (layer is lock-step this step) and `stale` (local updates since the last sync, counting this
// step's). Returns, per layer, whether it enters lock-step from a local regime (it must be averaged first).
std::vector<bool> decide_step(Policy& policy, int64_t step, bool lockstep_all, bool closing,
                              std::vector<Action>& actions, std::vector<bool>& lockstep, std::vector<int64_t>& stale);

// trigger[l] = index of the bucket launched when layer l is ready (its lowest layer), -1 for none.
std::vector<int> bucket_triggers(const std::vector<Bucket>& buckets, int num_layers);

// The blocking average of the chosen layers' parameters (Local SGD's, a switch's, a lock-step entry's): buckets of
// AverageParams under `cap_bytes` (no small first bucket), in launch order.
std::vector<Bucket> plan_average(const std::vector<bool>& which, const std::vector<LayerRange>& ranges,
                                 int64_t cap_bytes);

// Which arena a collective reads and writes.
enum class Arena : int8_t { Grads, Params, Buffers, OptState };

// One collective of a bucket: `n` floats at `off` of `arena` (OptState: slot * num_params + param range).
struct BucketPart {
  Arena arena;
  int64_t off, n;
  const char* what;  // the fingerprint name of --check-collectives
};

// The collectives of bucket `b`, in launch order: AllreduceGrads its gradients; an average its parameters, then
// its buffers (when `with_buffers` and it has any), then each of `opt_slots` optimizer-state slots.
std::vector<BucketPart> bucket_parts(const Bucket& b, bool with_buffers, int opt_slots, int64_t num_params);

}  // namespace dd::sync
