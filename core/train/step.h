// One training step on one rank, as docs/design.md "One training step" writes it: forward, backward with the sync
// engine's hook, the wait for synchronization with the per-layer update, after-update. The trainer and the
// tests' harness (tests/sync/ranks_harness.h) both run this function. Header-only: the sync tests link no dd_train.
#pragma once
#include <cstdint>

#include "base/clock.h"
#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/sync_engine.h"

namespace dd::train {

// Where a step computes: a model and its optimizer on the host (HostCompute below, the tests' harness), or on the
// rank's device (the trainer's DeviceCompute, core/train/run_loop.h).
class StepCompute {
 public:
  virtual ~StepCompute() = default;
  virtual models::ForwardResult forward() = 0;  // this step's batch, training mode
  virtual void backward(nn::BackwardHook* hook) = 0;
  virtual void update_layer(int layer, float lr) = 0;
  virtual int num_layers() const = 0;
};

class HostCompute final : public StepCompute {
 public:
  HostCompute(models::Model& m, optim::Optimizer& o, const models::Input& in) : m_(m), o_(o), in_(in) {}
  models::ForwardResult forward() override { return m_.forward(in_, true); }
  void backward(nn::BackwardHook* hook) override { m_.backward(hook); }
  void update_layer(int layer, float lr) override { o_.update_layer(layer, lr); }
  int num_layers() const override { return m_.num_layers(); }

 private:
  models::Model& m_;
  optim::Optimizer& o_;
  const models::Input& in_;
};

// What watches a step from outside, at fixed points; none of it is the step's arithmetic except admit().
class StepWatch {
 public:
  virtual ~StepWatch() = default;
  // Deferred update only: every collective the update needs is done, no layer is updated yet.
  virtual void after_sync() {}
  // Whether layer l is updated this step (the anomaly guard: not with a non-finite gradient). Called once per
  // layer, right before its update, in the order the updates come up.
  virtual bool admit(int /*layer*/) { return true; }
  // After every update: whether this rank saw an anomaly in the step (the engine's end() carries the report in
  // its control votes).
  virtual bool after_updates(const models::ForwardResult& /*fr*/) { return false; }
};

struct StepResult {
  models::ForwardResult forward;
  double forward_ms = 0, backward_ms = 0;
  double update_ms = 0;  // from the end of the synchronization wait (deferred) or its start (immediate)
  double end_s = 0;      // now_s() when the step (the engine's end() included) was done
  sync::StepCommStats comm;  // the step's communication (none without an engine)
};

// engine null: a single process (no hook, plain updates). immediate_update: each layer is updated as soon as
// the engine allows, else once every collective has ended, from the last layer down (SyncEngine::
// finalize_backward, which returns the layers in that order). Layer l's learning rate is lr times the engine's
// staleness factor. The engine's begin(step) is the caller's, before this.
inline StepResult train_step(StepCompute& c, sync::SyncEngine* engine, float lr, bool immediate_update,
                             StepWatch& watch) {
  StepResult r;
  double t4 = 0;
  const double t1 = now_s();
  r.forward = c.forward();
  const double t2 = now_s();
  if (engine) engine->prepare_for_backward();
  c.backward(engine);
  const double t3 = now_s();
  if (engine) {
    if (immediate_update) t4 = now_s();  // layers are updated as their averages arrive, inside the wait
    sync::ReadyLayers& ready = engine->finalize_backward(immediate_update);
    if (!immediate_update) {  // the deferred update's synced point: every collective has ended
      t4 = now_s();
      watch.after_sync();
    }
    while (auto u = ready.next())
      if (watch.admit(u->layer)) c.update_layer(u->layer, lr * u->lr_factor);
  } else {
    t4 = now_s();
    watch.after_sync();
    for (int l = c.num_layers() - 1; l >= 0; --l)
      if (watch.admit(l)) c.update_layer(l, lr);
  }
  const bool anomaly = watch.after_updates(r.forward);
  const double t_upd = now_s();
  if (engine) r.comm = engine->end({anomaly});  // its waiting (e.g. Local SGD's blocking average) is exposed comm
  r.end_s = now_s();
  r.forward_ms = (t2 - t1) * 1e3;
  r.backward_ms = (t3 - t2) * 1e3;
  r.update_ms = (t_upd - t4) * 1e3;
  return r;
}

}  // namespace dd::train
