// LayerSync's updates (layer_sync.h): the second half of a step, after the backward launched every bucket. The
// wait for the collectives and the hand-out of the layers in the order they may be updated (ReadyLayers), which the
// trainer drains; no call goes back into it.
#include "base/clock.h"
#include "core/sync/engine/layer_sync.h"

namespace dd::sync {

ReadyLayers& LayerSync::finalize_backward(bool immediate) {
  if (immediate) launches_.check_all_launched(step_);
  else finish_backward();
  launches_.cursor = UpdateCursor{true, immediate, num_layers() - 1};
  return *this;
}

void LayerSync::finish_backward() {
  launches_.check_all_launched(step_);
  const double t0 = now_s();
  for (auto& f : launches_.inflight)
    for (auto& w : f.works) w->wait();
  const double t1 = now_s();
  coll_.stats().exposed_ms += (t1 - t0) * 1e3;
  for (auto& f : launches_.inflight)
    if (f.record >= 0) copies_.apply(launches_.instep[size_t(f.record)], /*in_step=*/true);
  end_of_backward(t1);
}

// The updates in the order they may be made. Immediate: the layers no collective of this step guards, from the
// last down, then each bucket's layers (from its hi down) once its collectives end, in launch order; deferred:
// every layer from the last down (finalize_backward waited for everything).
std::optional<LayerUpdate> LayerSync::next() {
  UpdateCursor& c = launches_.cursor;
  if (!c.open) return std::nullopt;
  while (c.layer >= 0) {
    const int l = c.layer--;
    if (!c.immediate || plan_.local_now(l)) return LayerUpdate{l, lr_factor(l)};
  }
  if (!c.immediate) {
    c.open = false;
    return std::nullopt;
  }
  for (;;) {
    if (c.bucket > 0 && c.in_bucket >= launches_.inflight[c.bucket - 1].bucket.lo) {
      const int l = c.in_bucket--;
      return LayerUpdate{l, lr_factor(l)};
    }
    if (c.bucket == launches_.inflight.size()) break;
    InFlight& f = launches_.inflight[c.bucket++];
    const double t0 = now_s();
    for (auto& w : f.works) w->wait();
    c.waited += now_s() - t0;
    if (f.record >= 0) copies_.apply(launches_.instep[size_t(f.record)], /*in_step=*/true);
    c.in_bucket = f.bucket.hi;
  }
  coll_.stats().exposed_ms += c.waited * 1e3;
  end_of_backward(now_s());
  c.open = false;
  return std::nullopt;
}

}  // namespace dd::sync
