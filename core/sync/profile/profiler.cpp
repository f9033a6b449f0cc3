// measure_profile: hook timestamps for backward times, timed blocking all-reduces for communication times.
#include "core/sync/profile/profiler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <thread>

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

// One pass: forward, backward (ready times on `clock`), the update of every layer or, without an optimizer,
// zeroed gradients. Returns its forward, backward and update times.
struct Pass {
  models::Model& m;
  const std::function<models::Input(int)>& batch;
  const std::function<void(int layer)>& update;
  ReadyClock& clock;

  std::array<double, 3> operator()(int i) const {
    const int L = m.num_layers();
    const models::Input in = batch(i);
    const double tf = now_s();
    m.forward(in, true);
    const double t0 = now_s();
    clock.start = t0;
    m.backward(&clock);
    const double t1 = now_s();
    if (update)
      for (int l = L - 1; l >= 0; --l) update(l);  // zeroes each layer's gradient
    else
      m.grads().zero();
    return std::array<double, 3>{t0 - tf, t1 - t0, now_s() - t1};
  }
};

// Untimed passes, from pass `first` on, while an all-reduce that every rank posts is under way (at most
// 4 x steps of them; then it waits): no rank times a pass before every rank computes, nor after one stopped.
void busy_until_all(Backend& b, int steps, const Pass& pass, int first) {
  float flag = 1;
  auto w = b.allreduce(&flag, 1, ReduceOp::Sum);
  for (int i = 0; i < 4 * steps && !w->test(); ++i) pass(first + i);
  w->wait();
}

// Until every rank has called this: an all-reduce that every rank posts, waited for in naps of a millisecond, so
// that a rank waiting here leaves the cores to the one timing its passes (a backend's own wait may spin).
void rest_until_all(Backend& b) {
  float flag = 1;
  auto w = b.allreduce(&flag, 1, ReduceOp::Sum);
  while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  w->wait();
}

// Every timed pass's times: per layer its backward, and the pass's forward, update and total.
struct PassTimes {
  std::vector<std::vector<double>> bp;
  std::vector<double> fwd, upd, totals;
};

PassTimes time_passes(const Pass& pass, int steps, bool opt) {
  const int L = pass.m.num_layers();
  PassTimes s;
  s.bp.resize(size_t(L));
  for (int i = 1; i <= steps; ++i) {
    const auto t = pass(i);
    const auto per_layer = backward_times(pass.clock.t, pass.clock.start);
    for (int l = 0; l < L; ++l) s.bp[size_t(l)].push_back(per_layer[size_t(l)]);
    s.fwd.push_back(t[0]);
    s.upd.push_back(t[2]);
    s.totals.push_back(opt ? t[0] + t[1] + t[2] : t[1]);
  }
  return s;
}

// This rank's profile: the median of every part, scaled together to add up to the median whole pass.
LayerProfile scaled_medians(models::Model& m, const PassTimes& s, bool opt) {
  const int L = m.num_layers();
  LayerProfile p;
  p.comm.assign(L, 0);
  std::vector<double> parts;
  for (int l = 0; l < L; ++l) {
    p.names.push_back(m.layers()[l]->name);
    p.bp.push_back(median_of(s.bp[size_t(l)]));
    parts.push_back(p.bp.back());
  }
  if (opt) {
    p.forward_s = median_of(s.fwd);
    p.update_s = median_of(s.upd);
    parts.push_back(p.forward_s);
    parts.push_back(p.update_s);
  }
  const double k = pass_scale(parts, s.totals);
  for (auto& t : p.bp) t *= k;
  if (opt) p.forward_s *= k, p.update_s *= k;
  p.rank_pass_s = {median_of(s.totals)};
  return p;
}

// Every layer's all-reduce time: the median of comm_reps timed blocking all-reduces after one untimed.
void measure_comm(models::Model& m, Backend& b, int comm_reps, LayerProfile& p) {
  for (int l = 0; l < m.num_layers(); ++l) {
    auto* layer = m.layers()[l];
    FloatBuffer buf(size_t(layer->num_params() + layer->num_buffers()));
    std::vector<double> ts;
    for (int r = 0; r <= comm_reps; ++r) {
      b.barrier();
      const double t0 = now_s();
      b.allreduce(buf.data(), buf.size(), ReduceOp::Avg)->wait();
      if (r > 0) ts.push_back(now_s() - t0);
    }
    p.comm[l] = median_of(ts);
  }
}

// The contention of overlap, the ranks' average of every part, and those paced to the slowest rank's median pass.
void agree_across_ranks(Backend& b, bool opt, LayerProfile& p) {
  const double pass_s = p.rank_pass_s[0];
  HostDataPath host;
  p.contention = measure_contention(host, b);
  agree_profile(host, b, p.bp, p.comm, &p.contention);
  if (opt) {
    std::vector<float> step{float(p.forward_s), float(p.update_s)};
    agree_floats(host, b, step, ReduceOp::Avg);
    p.forward_s = step[0], p.update_s = step[1];
  }
  // Every rank's median pass (a sum of one-hot vectors: exact), then the agreed parts paced to the slowest.
  std::vector<float> each(size_t(b.size()), 0.0f);
  each[size_t(b.rank())] = float(pass_s);
  agree_floats(host, b, each, ReduceOp::Sum);
  p.rank_pass_s.assign(each.begin(), each.end());
  std::vector<double> agreed = p.bp;
  if (opt) agreed.push_back(p.forward_s), agreed.push_back(p.update_s);
  const double slow = slowest_scale(agreed, p.rank_pass_s);
  for (auto& t : p.bp) t *= slow;
  if (opt) p.forward_s *= slow, p.update_s *= slow;
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
  ReadyClock clock;
  clock.t.assign(m.num_layers(), 0);
  const Pass pass{m, batch, update, clock};
  const bool ranks = b && b->size() > 1;
  const CoreShare share = ranks ? core_share(*b, o.threads) : CoreShare{usable_cores(), 1, false};
  pass(0);  // warm-up: first-touch allocations, primitive creation
  PassTimes times;
  if (share.oversubscribed) {
    // One rank at a time, the others resting (every one past its warm-up first): each pass is this rank's alone.
    rest_until_all(*b);
    for (int r = 0; r < b->size(); ++r) {
      if (r == b->rank()) times = time_passes(pass, o.steps, opt);
      rest_until_all(*b);
    }
  } else {
    // Every timed pass runs while every rank computes, as in training between two syncs (busy_until_all).
    if (ranks) busy_until_all(*b, o.steps, pass, 1);
    times = time_passes(pass, o.steps, opt);
    if (ranks) busy_until_all(*b, o.steps, pass, o.steps + 1);
  }
  LayerProfile p = scaled_medians(m, times, opt);
  p.shared = share;
  if (ranks) {
    measure_comm(m, *b, o.comm_reps, p);
    agree_across_ranks(*b, opt, p);
  }
  return p;
}

}  // namespace dd::sync
