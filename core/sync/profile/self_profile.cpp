// SelfProfile: ready-time backward profile and the alpha-beta comm model, agreed across ranks (self_profile.h).
#include "core/sync/profile/self_profile.h"

#include <algorithm>
#include <stdexcept>

#include "base/clock.h"
#include "base/error.h"
#include "core/ops/ops.h"
#include "core/sync/profile/profiler.h"

namespace dd::sync {

std::vector<double> backward_times(const std::vector<double>& ready, double t_bwd) {
  const int L = int(ready.size());
  std::vector<double> t(size_t(L), 0.0);
  for (int l = L - 1; l >= 0; --l) t[size_t(l)] = ready[size_t(l)] - (l == L - 1 ? t_bwd : ready[size_t(l + 1)]);
  return t;
}

void SelfProfile::add(int64_t step, const std::vector<double>& ready, double t_bwd) {
  if (step == 0) return;
  const auto t = backward_times(ready, t_bwd);
  for (size_t l = 0; l < sum_.size(); ++l) sum_[l] += t[l];
  ++n_;
}

LayerTimes SelfProfile::mean_backward() const {
  LayerTimes t;
  t.backward_s.resize(sum_.size());
  for (size_t l = 0; l < sum_.size(); ++l) t.backward_s[l] = n_ ? sum_[l] / n_ : 0;
  return t;
}

void SelfProfile::agree(DataPath& dp, Backend& b, LayerTimes& t) {
  // Every rank's mean backward (a sum of one-hot vectors: exact) before the rank average, which is then paced to the
  // slowest rank, as `dreamddp profile` does: a step waits for the slowest rank's layers, not for the average's.
  std::vector<float> each(size_t(b.size()), 0.0f);
  for (double x : t.backward_s) each[size_t(b.rank())] += float(x);
  agree_floats(dp, b, each, ReduceOp::Sum);
  agree_profile(dp, b, t.backward_s, t.comm_s, &t.contention);
  const double slow = slowest_scale(t.backward_s, std::vector<double>(each.begin(), each.end()));
  for (auto& x : t.backward_s) x *= slow;
}

LayerTimes SelfProfile::finish(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                               const Contention* given) {
  LayerTimes t = mean_backward();
  t.comm_s = measure_comm_model(dp, b, layers, bucket_cap_);
  t.contention = given ? *given : measure_contention(dp, b);
  agree(dp, b, t);
  return t;
}

void SelfProfile::add_comm(int64_t bytes, double seconds) {
  comm_bytes_.push_back(bytes);
  comm_s_.push_back(seconds);
}

LayerTimes SelfProfile::finish_observed(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                                        const Contention* given) {
  LayerTimes t = mean_backward();
  const CommFit fit = comm_s_.empty() ? CommFit{} : fit_comm(comm_bytes_, comm_s_);
  for (auto& m : layers) t.comm_s.push_back(fit.at(m.bytes));
  if (given) t.contention = *given;
  agree(dp, b, t);
  return t;
}

void agree_floats(DataPath& dp, Backend& b, std::vector<float>& v, ReduceOp op) {
  dp.allreduce_host(b, v.data(), v.size(), op)->wait();
  dp.broadcast_host(b, v.data(), v.size(), 0);
}

void agree_profile(DataPath& dp, Backend& b, std::vector<double>& bp, std::vector<double>& comm, Contention* k) {
  const size_t L = bp.size();
  if (comm.size() != L) throw std::invalid_argument("agree_profile: backward and comm times differ in length");
  std::vector<float> v(2 * L + (k ? 2 : 0));
  for (size_t l = 0; l < L; ++l) v[l] = float(bp[l]), v[L + l] = float(comm[l]);
  if (k) v[2 * L] = float(k->compute), v[2 * L + 1] = float(k->comm);
  agree_floats(dp, b, v, ReduceOp::Avg);
  for (size_t l = 0; l < L; ++l) bp[l] = v[l], comm[l] = v[L + l];
  if (k) k->compute = v[2 * L], k->comm = v[2 * L + 1];
}

void SelfProfile::save(ByteWriter& w) const {
  w.put_vec(sum_);
  w.put<int32_t>(n_);
}

void SelfProfile::save_comm(ByteWriter& w) const {
  w.put_vec(comm_bytes_);
  w.put_vec(comm_s_);
}

void SelfProfile::load_comm(ByteReader& r) {
  comm_bytes_ = r.get_vec<int64_t>();
  comm_s_ = r.get_vec<double>();
  if (comm_bytes_.size() != comm_s_.size()) throw UsageError("checkpoint: engine state is damaged (profile)");
}

void SelfProfile::load(ByteReader& r) {
  auto s = r.get_vec<double>();
  if (s.size() != sum_.size()) throw UsageError("checkpoint: engine state is for another model (profile)");
  sum_ = s;
  n_ = r.get<int32_t>();
}

std::vector<double> measure_comm_model(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                                       int64_t bucket_cap, CommFit* fit_out) {
  auto timed = [&](int64_t bytes) {
    // In arena space: on a device the timed collective includes its staging, as the real buckets do.
    const size_t len = size_t(std::max<int64_t>((bytes + 3) / 4, 1));
    float* buf = dp.scratch(len);
    std::vector<double> ts;
    for (int i = 0; i < 3; ++i) {
      const double t0 = now_s();
      dp.allreduce(b, buf, len, ReduceOp::Sum, -1)->wait();
      ts.push_back(now_s() - t0);
    }
    std::sort(ts.begin(), ts.end());
    return ts[1];
  };
  std::vector<int64_t> layer_bytes;
  for (auto& m : layers) layer_bytes.push_back(m.bytes);
  const auto sizes = comm_probe_sizes(layer_bytes, bucket_cap);
  timed(sizes.front());  // warm-up: connections and the scratch arena
  std::vector<double> c;
  for (int64_t s : sizes) c.push_back(timed(s));
  const CommFit fit = fit_comm(sizes, c);
  if (fit_out) *fit_out = fit;
  std::vector<double> out;
  for (int64_t bytes : layer_bytes) out.push_back(fit.at(bytes));
  return out;
}

Contention measure_contention(DataPath& dp, Backend& b) {
  if (!dp.host_memory() || b.size() < 2) return {};  // the same on every rank: no collective is skipped by one
  const int64_t n = 256;
  std::vector<float> A(size_t(n * n), 0.5f), B(size_t(n * n), 0.25f), C(size_t(n * n), 0.0f);
  auto gemms = [&](int reps) {
    const double t0 = now_s();
    for (int i = 0; i < reps; ++i) ops::gemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    return now_s() - t0;
  };
  gemms(2);  // warm-up: the primitive
  const double probe_s = 0.02;
  const int reps = int(std::clamp(probe_s / std::max(gemms(8) / 8, 1e-7), 8.0, 4096.0));
  // Two all-reduces sized at the rate of a 1 Mi-float one on this network: a long one that outlasts the GEMM loop
  // (twice its length) and a short one that ends inside it (half), rank 0's sizes everywhere (every rank must
  // launch the same collectives). Host memory (the path is on the host here), freed after the probe.
  const size_t ref = size_t(1) << 20;
  std::vector<float> buf(ref, 0.0f);
  b.allreduce(buf.data(), ref, ReduceOp::Sum)->wait();
  const double t0 = now_s();
  b.allreduce(buf.data(), ref, ReduceOp::Sum)->wait();
  const double t_ref = std::max(now_s() - t0, 1e-6);
  float len[2] = {float(std::clamp(double(ref) * 2 * probe_s / t_ref, 65536.0, 16777216.0)),
                  float(std::clamp(double(ref) * 0.5 * probe_s / t_ref, 4096.0, 16777216.0))};
  b.broadcast(len, 2, 0)->wait();
  buf.assign(size_t(len[0]), 0.0f);
  std::vector<double> alone, overlapped, comm_alone, comm_overlapped;
  for (int r = 0; r < 3; ++r) {
    b.barrier();
    alone.push_back(gemms(reps));
    b.barrier();
    auto w = b.allreduce(buf.data(), size_t(len[0]), ReduceOp::Sum);
    overlapped.push_back(gemms(reps));
    w->wait();
    b.barrier();
    double s = now_s();
    b.allreduce(buf.data(), size_t(len[1]), ReduceOp::Sum)->wait();
    comm_alone.push_back(now_s() - s);
    b.barrier();
    s = now_s();
    w = b.allreduce(buf.data(), size_t(len[1]), ReduceOp::Sum);
    gemms(reps);
    w->wait();
    // The end as the communication thread saw it (a backend that does not record it: the wait's return).
    comm_overlapped.push_back((w->end_time() > 0 ? w->end_time() : now_s()) - s);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[1];
  };
  Contention k;
  k.compute = std::max(0.0, median(overlapped) / median(alone) - 1.0);
  k.comm = std::max(0.0, median(comm_overlapped) / median(comm_alone) - 1.0);
  return k;
}

}  // namespace dd::sync
