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

// Where a step computes: the host model and its optimizer (HostCompute below), or a device (the trainer's
// adapter of core/train/device_state.h).
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
  // After every update, before the engine's after_update (whose control votes carry an anomaly report).
  virtual void after_updates(const models::ForwardResult& /*fr*/) {}
};

struct StepResult {
  models::ForwardResult forward;
  double forward_ms = 0, backward_ms = 0;
  double update_ms = 0;  // from the end of the synchronization wait (deferred) or its start (immediate)
  double end_s = 0;      // now_s() when the step (after_update included) was done
};

// engine null: a single process (no hook, plain updates). immediate_update: each layer is updated as soon as
// the engine allows (finish_backward_and_update), else after finish_backward, from the last layer down. Layer
// l's learning rate is lr times the engine's staleness factor. begin_step(step) is the caller's, before this.
inline StepResult train_step(StepCompute& c, sync::SyncEngine* engine, float lr, bool immediate_update,
                             StepWatch& watch) {
  StepResult r;
  auto update = [&](int l) {
    if (watch.admit(l)) c.update_layer(l, engine ? lr * engine->lr_factor(l) : lr);
  };
  const double t1 = now_s();
  r.forward = c.forward();
  const double t2 = now_s();
  if (engine) engine->begin_backward();
  c.backward(engine);
  const double t3 = now_s();
  double t4;
  if (engine && immediate_update) {  // layers are updated as their averages arrive, inside the wait
    t4 = now_s();
    engine->finish_backward_and_update(update);
  } else {
    if (engine) engine->finish_backward();
    t4 = now_s();
    watch.after_sync();
    for (int l = c.num_layers() - 1; l >= 0; --l) update(l);
  }
  watch.after_updates(r.forward);
  const double t_upd = now_s();
  if (engine) engine->after_update();  // its waiting (e.g. Local SGD's blocking average) is exposed comm
  r.end_s = now_s();
  r.forward_ms = (t2 - t1) * 1e3;
  r.backward_ms = (t3 - t2) * 1e3;
  r.update_ms = (t_upd - t4) * 1e3;
  return r;
}

}  // namespace dd::train
