// The DreamDDP time model: FIFO channel per phase, baselines, plsgd grouping and fill-in.
#include "core/sync/schedule/schedule_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace dd::sync {

namespace {

void check_inputs(const std::vector<double>& b, const std::vector<double>& c, int H) {
  if (b.size() != c.size())
    throw std::invalid_argument("schedule model: " + std::to_string(b.size()) + " backward times but " +
                                std::to_string(c.size()) + " comm times");
  if (H < 1) throw std::invalid_argument("schedule model: H must be >= 1, got " + std::to_string(H));
}

// Chain end of one phase as the engine launches it: adjacent layers that sync together are fused into one bucket
// (core/sync/types/bucket_plan.h), launched when its lowest layer, the last of them in backward, is ready. (The bucket
// caps, which would split a long run, are ignored: that errs towards a later end.) Launch order L-1 .. 0.
// Chain end of one phase, every layer launched on its own when ready (the time model's assumption).
double phase_end(const std::vector<double>& R, const std::vector<double>& c, const std::vector<char>& member) {
  double end = 0.0;
  for (size_t k = R.size(); k-- > 0;)
    if (member[k]) end = std::max(end, R[k]) + c[k];
  return end;
}

double phase_end_fused(const std::vector<double>& R, const std::vector<double>& c, const std::vector<char>& member) {
  double end = 0.0;
  for (size_t k = R.size(); k-- > 0;) {
    if (!member[k]) continue;
    double comm = c[k];
    while (k > 0 && member[k - 1]) comm += c[--k];
    end = std::max(end, R[k]) + comm;
  }
  return end;
}

}  // namespace

double total_backward(const std::vector<double>& b) { return std::accumulate(b.begin(), b.end(), 0.0); }

std::vector<double> ready_times(const std::vector<double>& b) {
  // R_l = B - (sum of b before l): computed this way R_0 == B exactly, so the last layer never "waits" by rounding.
  const double B = total_backward(b);
  std::vector<double> R(b.size());
  double prefix = 0.0;
  for (size_t l = 0; l < b.size(); ++l) {
    R[l] = B - prefix;
    prefix += b[l];
  }
  return R;
}

std::vector<double> phase_waits(const std::vector<double>& b, const std::vector<double>& c, int H,
                                const std::vector<int>& phase, const FillIn* fillin) {
  check_inputs(b, c, H);
  const size_t L = b.size();
  if (phase.size() != L) throw std::invalid_argument("schedule model: phase vector has wrong length");
  if (fillin && fillin->size() != L) throw std::invalid_argument("schedule model: fill-in vector has wrong length");
  const double B = total_backward(b);
  const auto R = ready_times(b);
  std::vector<double> end(H, 0.0);
  auto launch = [&](size_t l, int p) {
    if (p < 0 || p >= H)
      throw std::invalid_argument("schedule model: layer " + std::to_string(l) + " has phase " +
                                  std::to_string(p) + " outside [0, " + std::to_string(H) + ")");
    end[p] = std::max(end[p], R[l]) + c[l];
  };
  for (size_t l = L; l-- > 0;) {
    launch(l, phase[l]);
    if (fillin)
      for (int p : (*fillin)[l]) launch(l, p);
  }
  std::vector<double> w(H);
  for (int i = 0; i < H; ++i) w[i] = std::max(0.0, end[i] - B);
  return w;
}

namespace {

// One phase's iteration under contention: `launches` in launch order (backward order, fill-in after its layer).
double contended_phase(const std::vector<double>& R, double B, const std::vector<double>& c,
                       const std::vector<size_t>& launches, const Contention& k) {
  double Bp = B, end = 0.0;
  for (int round = 0; round < 4; ++round) {
    const double scale = B > 0 ? Bp / B : 1.0;
    double channel = 0.0, busy = 0.0;
    for (size_t l : launches) {
      const double s = std::max(channel, R[l] * scale);
      double e = s + c[l];
      if (s < Bp) {
        const double before = (Bp - s) / (1.0 + k.comm);  // transfer seconds (alone) done before backward ends
        e = c[l] <= before ? s + c[l] * (1.0 + k.comm) : Bp + (c[l] - before);
        busy += std::min(e, Bp) - s;
      }
      channel = e;
    }
    end = channel;
    Bp = B + k.compute / (1.0 + k.compute) * busy;
  }
  return std::max(Bp, end);
}

}  // namespace

double modelled_time(const std::vector<double>& b, const std::vector<double>& c, int H,
                     const std::vector<int>& phase, const FillIn* fillin, const Contention& k) {
  if (!(k.compute >= 0) || !std::isfinite(k.compute) || !(k.comm >= 0) || !std::isfinite(k.comm))
    throw std::invalid_argument("schedule model: contention must be finite and >= 0");
  const auto w = phase_waits(b, c, H, phase, fillin);  // checks the inputs
  if (k.none()) return total_backward(b) + std::accumulate(w.begin(), w.end(), 0.0) / H;
  const double B = total_backward(b);
  const auto R = ready_times(b);
  std::vector<std::vector<size_t>> launches(static_cast<size_t>(H));
  for (size_t l = b.size(); l-- > 0;) {
    launches[size_t(phase[l])].push_back(l);
    if (fillin)
      for (int p : (*fillin)[l]) launches[size_t(p)].push_back(l);
  }
  double sum = 0.0;
  for (auto& ls : launches) sum += contended_phase(R, B, c, ls, k);
  return sum / H;
}

double ddp_time(const std::vector<double>& b, const std::vector<double>& c) {
  check_inputs(b, c, 1);
  return total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0);
}

double localsgd_time(const std::vector<double>& b, const std::vector<double>& c, int H) {
  check_inputs(b, c, H);
  return total_backward(b) + std::accumulate(c.begin(), c.end(), 0.0) / H;
}

std::vector<int> contiguous_groups(const std::vector<double>& weight, int H) {
  if (H < 1) throw std::invalid_argument("contiguous_groups: H must be >= 1");
  const int L = static_cast<int>(weight.size());
  const double W = std::accumulate(weight.begin(), weight.end(), 0.0);
  std::vector<int> phase(L, 0);
  int start = 0;
  double running = 0.0;
  for (int g = 0; g < H && start < L; ++g) {
    int end = start;  // exclusive
    if (g == H - 1) {
      end = L;
    } else {
      const double target = W * (g + 1) / H;
      const int keep = std::max(0, std::min(H - 1 - g, L - start - 1));  // layers left for later groups
      const int max_end = L - keep;
      running += weight[end++];  // every group takes at least one layer
      while (end < max_end && std::abs(running + weight[end] - target) < std::abs(running - target))
        running += weight[end++];
    }
    for (int l = start; l < end; ++l) phase[l] = g;
    start = end;
  }
  return phase;
}

double plsgd_time(const std::vector<double>& b, const std::vector<double>& c, int H) {
  return modelled_time(b, c, H, contiguous_groups(c, H));
}

double delayed_time(const std::vector<double>& b, const std::vector<double>& c, int H, const std::vector<int>& phase,
                    int T, double fwd, double upd) {
  check_inputs(b, c, H);
  if (phase.size() != b.size()) throw std::invalid_argument("delayed_time: phase vector has wrong length");
  if (T < 0) throw std::invalid_argument("delayed_time: T must be >= 0, got " + std::to_string(T));
  if (!(fwd >= 0) || !(upd >= 0)) throw std::invalid_argument("delayed_time: forward and update must be >= 0");
  for (int p : phase)
    if (p < 0 || p >= H) throw std::invalid_argument("delayed_time: phase outside [0, H)");
  const double B = total_backward(b);
  const auto R = ready_times(b);
  const int M = 4 * H, N = M * (T + 4);
  std::vector<double> start(size_t(N) + 1, 0.0), end(size_t(N), 0.0);
  double S = 0.0, channel = 0.0;
  for (int i = 0; i < N; ++i) {
    if (T > 0 && i >= T) S = std::max(S, end[size_t(i - T)]);  // merge the averages of iteration i - T
    start[size_t(i)] = S;
    const double bwd0 = S + fwd;
    double last = 0.0;
    for (size_t l = b.size(); l-- > 0;)
      if (phase[l] == i % H) {
        channel = std::max(channel, bwd0 + R[l]) + c[l];
        last = channel;
      }
    end[size_t(i)] = last;
    S = bwd0 + B;
    if (T == 0) S = std::max(S, last);  // in-step: the update waits for this iteration's averages
    S += upd;
  }
  if (T > 0 && N >= T) S = std::max(S, end[size_t(N - T)]);  // the next iteration's start, its wait included
  start[size_t(N)] = S;
  return (start[size_t(N)] - start[size_t(N - M)]) / M;
}

double localsgd_delayed_time(const std::vector<double>& b, const std::vector<double>& c, int K, int T, double fwd,
                             double upd) {
  check_inputs(b, c, K);
  if (T < 0 || (T > 0 && T >= K))
    throw std::invalid_argument("localsgd_delayed_time: T must be in [0, K), got " + std::to_string(T));
  if (!(fwd >= 0) || !(upd >= 0)) throw std::invalid_argument("localsgd_delayed_time: forward and update must be >= 0");
  const double B = total_backward(b);
  const double C = std::accumulate(c.begin(), c.end(), 0.0);
  const int M = 4 * K, N = M * (T + 4);
  std::vector<double> start(size_t(N) + 1, 0.0), end(size_t(N), -1.0);  // end < 0: no launch in that iteration
  double S = 0.0, channel = 0.0;
  for (int i = 0; i < N; ++i) {
    if (T > 0 && i >= T && end[size_t(i - T)] >= 0) S = std::max(S, end[size_t(i - T)]);  // merge what i - T launched
    start[size_t(i)] = S;
    S += fwd + B + upd;
    if (i % K == K - 1) {  // launched after this iteration's update
      channel = std::max(channel, S) + C;
      end[size_t(i)] = channel;
      if (T == 0) S = channel;  // blocking: the next iteration starts after the average
    }
  }
  if (T > 0 && end[size_t(N - T)] >= 0) S = std::max(S, end[size_t(N - T)]);
  start[size_t(N)] = S;
  return (start[size_t(N)] - start[size_t(N - M)]) / M;
}

FillIn fill_in(const std::vector<double>& b, const std::vector<double>& c, int H, const std::vector<int>& phase) {
  check_inputs(b, c, H);
  const size_t L = b.size();
  if (phase.size() != L) throw std::invalid_argument("fill_in: phase vector has wrong length");
  const auto R = ready_times(b);
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return c[x] < c[y]; });

  FillIn extra(L);
  for (int p = 0; p < H; ++p) {
    std::vector<char> member(L, 0);
    for (size_t l = 0; l < L; ++l) member[l] = phase[l] == p;
    // Never open a collective in a step that has none: every step with a collective makes each rank wait for the
    // slowest one (a rendezvous the model does not see, measured 5-13 ms per step on 4 ranks of 2 cores), so only
    // steps that already pay it take extra layers, which then cost only the bandwidth the model does see.
    if (std::find(member.begin(), member.end(), 1) == member.end()) continue;
    const double base = phase_end(R, c, member);
    const double B = R.empty() ? 0.0 : R[0];
    // The phase's wait is max(0, end - B): an addition is free if the end stays within B or does not move, both
    // in the model and as the engine launches it (fused buckets end no earlier than the model's chain).
    const double allowed = std::max(base, B);
    for (size_t l : order) {
      if (member[l]) continue;
      // Never open a collective either: only a layer next to one the phase averages joins it (fused into that
      // bucket, it adds bytes, which the model sees, and no latency, which it does not: a separate 41 KB average
      // launched ahead of the phase's own took 18-21 ms from launch to end on 4 ranks of 2 cores, against the
      // ~1 ms the idle profile measures, and delayed the bucket behind it by as much).
      const bool next_to_bucket = (l > 0 && member[l - 1]) || (l + 1 < L && member[l + 1]);
      if (!next_to_bucket) continue;
      member[l] = 1;
      if (phase_end_fused(R, c, member) <= allowed) extra[l].push_back(p);
      else member[l] = 0;
    }
  }
  return extra;
}

}  // namespace dd::sync
