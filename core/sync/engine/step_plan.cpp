// decide_step, bucket_triggers, plan_average, bucket_parts: the engine's per-step plan, without any backend.
#include "core/sync/engine/step_plan.h"

namespace dd::sync {

std::vector<bool> decide_step(Policy& policy, int64_t step, bool lockstep_all, bool closing,
                              std::vector<Action>& actions, std::vector<bool>& lockstep, std::vector<int64_t>& stale) {
  const int L = int(actions.size());
  std::vector<bool> entering(L, false);
  for (int l = 0; l < L; ++l) {
    const bool was = lockstep[l];
    actions[l] = lockstep_all ? Action::AllreduceGrads : policy.decide(l, step);
    if (closing && actions[l] == Action::AverageParams) actions[l] = Action::None;
    lockstep[l] = actions[l] == Action::AllreduceGrads;
    // Local updates since the layer's last sync, counting this step's (lr_l = lr * gamma^stale_l).
    stale[l] = actions[l] == Action::None ? stale[l] + 1 : 0;
    entering[l] = lockstep[l] && !was;
  }
  if (!lockstep_all) policy.on_actions(step, actions);
  return entering;
}

std::vector<int> bucket_triggers(const std::vector<Bucket>& buckets, int num_layers) {
  std::vector<int> trigger(num_layers, -1);
  for (size_t i = 0; i < buckets.size(); ++i) trigger[buckets[i].lo] = int(i);
  return trigger;
}

std::vector<Bucket> plan_average(const std::vector<bool>& which, const std::vector<LayerRange>& ranges,
                                 int64_t cap_bytes) {
  std::vector<Action> a(which.size());
  for (size_t l = 0; l < which.size(); ++l) a[l] = which[l] ? Action::AverageParams : Action::None;
  return plan_buckets(a, ranges, cap_bytes, cap_bytes);
}

std::vector<BucketPart> bucket_parts(const Bucket& b, bool with_buffers, int opt_slots, int64_t num_params) {
  std::vector<BucketPart> out;
  if (b.action == Action::AllreduceGrads) {
    out.push_back({Arena::Grads, b.param_off, b.param_n, "allreduce-grads"});
    return out;
  }
  out.push_back({Arena::Params, b.param_off, b.param_n, action_name(b.action)});
  if (with_buffers && b.buffer_n) out.push_back({Arena::Buffers, b.buffer_off, b.buffer_n, "average-buffers"});
  for (int s = 0; s < opt_slots; ++s)
    out.push_back({Arena::OptState, s * num_params + b.param_off, b.param_n, "average-optimizer-state"});
  return out;
}

}  // namespace dd::sync
