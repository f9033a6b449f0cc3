// Shared harness of the sync-engine tests: N ranks as threads over one Gloo HashStore, and one training step
// through the engine exactly as the trainer runs it.
#pragma once
#include <gloo/rendezvous/hash_store.h>

#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends/gloo/gloo_backend.h"
#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/tensor/rng.h"
#include "core/train/step.h"

namespace dd::testing_harness {

// Runs fn(rank, backend) on `world` threads; rethrows the first failure after all threads ended.
inline void run_ranks(int world, const std::function<void(int, Backend&)>& fn, double timeout_s = 20) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  static std::atomic<int> job{0};
  const std::string prefix = "t" + std::to_string(job++);
  std::vector<std::thread> th;
  std::vector<std::exception_ptr> err(world);
  for (int r = 0; r < world; ++r)
    th.emplace_back([&, r] {
      try {
        BackendOptions o;
        o.rank = r;
        o.world = world;
        o.timeout_s = timeout_s;
        o.prefix = prefix;
        auto b = make_gloo_backend(r, world, store, o);
        fn(r, *b);
      } catch (...) {
        err[r] = std::current_exception();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
}

// One training step through the engine: the trainer's own step function (core/train/step.h). `after_sync`, when
// given, runs between the step's synchronization and its update (where the sync semantics are observable).
inline void engine_step(models::Model& m, optim::Optimizer& opt, sync::SyncEngine& e, const models::Input& in,
                        int64_t step, float lr, const std::function<void()>& after_sync = {}) {
  struct AfterSync final : train::StepWatch {
    const std::function<void()>& fn;
    explicit AfterSync(const std::function<void()>& f) : fn(f) {}
    void after_sync() override {
      if (fn) fn();
    }
  } watch(after_sync);
  train::HostCompute compute(m, opt, in);
  e.begin(step);
  train::train_step(compute, &e, lr, /*immediate_update=*/false, watch);
}

// Parameters then buffers, as one vector.
inline std::vector<float> snapshot(models::Model& m) {
  std::vector<float> v(m.params().data(), m.params().data() + m.params().size());
  v.insert(v.end(), m.buffers().data(), m.buffers().data() + m.buffers().size());
  return v;
}

// Small buckets so that even small models launch several collectives per step.
inline sync::EngineOptions engine_options(const std::string& policy) {
  sync::EngineOptions o;
  o.policy = sync::PolicySpec::parse(policy);
  o.verbose = false;
  o.first_bucket_bytes = 64 << 10;
  o.bucket_cap_bytes = 1 << 20;
  return o;
}

// Rank r's own random images and labels: the ranks' local statistics (and so their votes) differ.
struct RankData {
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t per_sample = 1, n;
  RankData(models::Model& m, int64_t n_, uint64_t seed) : n(n_) {
    Rng r(seed);
    for (auto s : m.input_shape()) per_sample *= s;
    x.resize(n * per_sample);
    for (auto& v : x) v = r.normal();
    y.resize(n);
    for (auto& t : y) t = int32_t(r.next() % m.num_classes());
  }
  models::Input batch(int64_t first, int64_t b) const {
    models::Input in;
    in.n = b;
    in.x = x.data() + (first % n) * per_sample;
    in.y = y.data() + first % n;
    return in;
  }
};

}  // namespace dd::testing_harness
