// plan_buckets: walk layers in backward order, extend the open bucket while the action matches and it is under its cap.
#include "core/sync/types/bucket_plan.h"

namespace dd::sync {

std::vector<Bucket> plan_buckets(const std::vector<Action>& actions, const std::vector<LayerRange>& layers,
                                 int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<Bucket> out;
  bool open = false;
  for (int l = int(layers.size()) - 1; l >= 0; --l) {
    const Action a = actions[l];
    if (a == Action::None) {
      open = false;
      continue;
    }
    const auto& r = layers[l];
    // The first bucket launched is small so communication starts early (PyTorch's 1 MiB first bucket).
    const int64_t cap = out.size() == 1 ? first_cap_bytes : cap_bytes;
    if (open) {
      Bucket& b = out.back();
      // PyTorch's Reducer: a bucket takes layers until it has reached its cap, so the last layer may take it past
      // the cap (the first bucket then holds the last layer plus enough to start communicating early).
      if (b.action == a && b.bytes() < cap && r.param_off + r.param_n == b.param_off) {
        b.lo = l;
        b.param_off = r.param_off;
        b.param_n += r.param_n;
        b.buffer_off = r.buffer_off;
        b.buffer_n += r.buffer_n;
        continue;
      }
    }
    Bucket b;
    b.lo = b.hi = l;
    b.action = a;
    b.param_off = r.param_off;
    b.param_n = r.param_n;
    b.buffer_off = r.buffer_off;
    b.buffer_n = r.buffer_n;
    out.push_back(b);
    open = true;
  }
  return out;
}

}  // namespace dd::sync
