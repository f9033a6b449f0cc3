// measure_profile: hook timestamps for backward times, timed blocking all-reduces for communication times.
#include "core/sync/profile/profiler.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "backends/backend.h"
#include "base/clock.h"
#include "core/sync/profile/self_profile.h"
#include "core/tensor/buffer.h"

namespace dd::sync {
namespace {

struct ReadyClock : nn::BackwardHook {
  std::vector<double> t;
  double start = 0;  // the backward's start
  void on_layer_ready(int i) override { t[i] = now_s(); }
};

// The upper median (no mean of the middle two): the profiles were always taken so, and a schedule solved from them
// depends on their exact values.
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

double pass_scale(const std::vector<double>& part_medians, std::vector<double> pass_totals) {
  double parts = 0;
  for (double p : part_medians) parts += p;
  const double total = median_of(std::move(pass_totals));
  return parts > 0 && total > 0 ? total / parts : 1.0;
}

double slowest_scale(const std::vector<double>& parts, const std::vector<double>& rank_passes) {
  double sum = 0, slowest = 0;
  for (double p : parts) sum += p;
  for (double t : rank_passes) slowest = std::max(slowest, t);
  return sum > 0 && slowest > 0 ? slowest / sum : 1.0;
}

LayerProfile measure_profile(models::Model& m, const std::function<models::Input(int)>& batch, Backend* b,
                             const ProfileOptions& o, const std::function<void(int layer)>& update) {
  const bool opt = bool(update);
  const int L = m.num_layers();
  ReadyClock clock;
  clock.t.assign(L, 0);
  std::vector<std::vector<double>> bp(L);
  std::vector<double> fwd, upd, totals;
  // One pass: forward, backward (ready times), the update of every layer or, without an optimizer, zeroed
  // gradients. Returns its forward, backward and update times.
  auto pass = [&](int i) {
    const models::Input in = batch(i);
    const double tf = now_s();
    m.forward(in, true);
    const double t0 = now_s();
    clock.start = t0;
    m.backward(&clock);
    const double t1 = now_s();
    if (opt)
      for (int l = L - 1; l >= 0; --l) update(l);  // zeroes each layer's gradient
    else
      m.grads().zero();
    return std::array<double, 3>{t0 - tf, t1 - t0, now_s() - t1};
  };
  // Every timed pass runs while every rank computes, as in training between two syncs: where ranks share cores,
  // that sharing is part of a pass's time. So no rank times a pass before every rank is computing or after one
  // has stopped: ranks compute untimed passes while an all-reduce that every rank posts is under way (at most
  // 4 x steps of them; then they wait).
  const bool ranks = b && b->size() > 1;
  auto busy_until_all = [&](int first) {
    if (!ranks) return;
    float flag = 1;
    auto w = b->allreduce(&flag, 1, ReduceOp::Sum);
    for (int i = 0; i < 4 * o.steps && !w->test(); ++i) pass(first + i);
    w->wait();
  };
  pass(0);  // warm-up: first-touch allocations, primitive creation
  busy_until_all(1);
  for (int i = 1; i <= o.steps; ++i) {
    const auto t = pass(i);
    const auto per_layer = backward_times(clock.t, clock.start);
    for (int l = 0; l < L; ++l) bp[l].push_back(per_layer[size_t(l)]);
    fwd.push_back(t[0]);
    upd.push_back(t[2]);
    totals.push_back(opt ? t[0] + t[1] + t[2] : t[1]);
  }
  busy_until_all(o.steps + 1);
  LayerProfile p;
  p.comm.assign(L, 0);
  std::vector<double> parts;
  for (int l = 0; l < L; ++l) {
    p.names.push_back(m.layers()[l]->name);
    p.bp.push_back(median_of(bp[l]));
    parts.push_back(p.bp.back());
  }
  if (opt) {
    p.forward_s = median_of(fwd);
    p.update_s = median_of(upd);
    parts.push_back(p.forward_s);
    parts.push_back(p.update_s);
  }
  const double pass_s = median_of(totals);
  const double k = pass_scale(parts, totals);
  for (auto& t : p.bp) t *= k;
  if (opt) p.forward_s *= k, p.update_s *= k;
  p.rank_pass_s = {pass_s};
  if (ranks) {
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
      p.comm[l] = median_of(ts);
    }
    HostDataPath host;
    p.contention = measure_contention(host, *b);
    agree_profile(host, *b, p.bp, p.comm, &p.contention);
    if (opt) {
      std::vector<float> step{float(p.forward_s), float(p.update_s)};
      agree_floats(host, *b, step, ReduceOp::Avg);
      p.forward_s = step[0], p.update_s = step[1];
    }
    // Every rank's median pass (a sum of one-hot vectors: exact), then the agreed parts paced to the slowest.
    std::vector<float> each(size_t(b->size()), 0.0f);
    each[size_t(b->rank())] = float(pass_s);
    agree_floats(host, *b, each, ReduceOp::Sum);
    p.rank_pass_s.assign(each.begin(), each.end());
    std::vector<double> agreed = p.bp;
    if (opt) agreed.push_back(p.forward_s), agreed.push_back(p.update_s);
    const double slow = slowest_scale(agreed, p.rank_pass_s);
    for (auto& t : p.bp) t *= slow;
    if (opt) p.forward_s *= slow, p.update_s *= slow;
  }
  return p;
}

}  // namespace dd::sync
