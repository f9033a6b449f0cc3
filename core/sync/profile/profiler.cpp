// measure_profile: hook timestamps for backward times, timed blocking all-reduces for communication times.
#include "core/sync/profile/profiler.h"

#include <algorithm>
#include <cstring>

#include "backends/backend.h"
#include "core/common/clock.h"
#include "core/sync/profile/self_profile.h"
#include "core/tensor/buffer.h"

namespace dd::sync {
namespace {

struct ReadyClock : nn::BackwardHook {
  std::vector<double> t;
  void on_layer_ready(int i) override { t[i] = now_s(); }
};

}  // namespace

LayerProfile measure_profile(models::Model& m, const std::function<models::Input(int)>& batch, Backend* b,
                             const ProfileOptions& o) {
  const int L = m.num_layers();
  ReadyClock clock;
  clock.t.assign(L, 0);
  std::vector<std::vector<double>> bp(L);
  for (int i = 0; i <= o.steps; ++i) {
    m.forward(batch(i), true);
    const double t0 = now_s();
    m.backward(&clock);
    m.grads().zero();
    if (i == 0) continue;  // warm-up: first-touch allocations, primitive creation
    const auto t = backward_times(clock.t, t0);
    for (int l = 0; l < L; ++l) bp[l].push_back(t[size_t(l)]);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  LayerProfile p;
  p.comm.assign(L, 0);
  for (int l = 0; l < L; ++l) {
    p.names.push_back(m.layers()[l]->name);
    p.bp.push_back(median(bp[l]));
  }
  if (b && b->size() > 1) {
    for (int l = 0; l < L; ++l) {
      auto* layer = m.layers()[l];
      FloatBuffer buf(size_t(layer->num_params() + layer->num_buffers()));
      std::vector<double> ts;
      for (int r = 0; r <= o.comm_reps; ++r) {
        b->barrier();
        const double t0 = now_s();
        b->allreduce(buf.data(), buf.size(), ReduceOp::Avg)->wait();
        if (r > 0) ts.push_back(now_s() - t0);
      }
      p.comm[l] = median(ts);
    }
    HostDataPath host;
    p.contention = measure_contention(host, *b);
    agree_profile(host, *b, p.bp, p.comm, &p.contention);
  }
  return p;
}

}  // namespace dd::sync
