// SelfProfile: ready-time backward profile and the alpha-beta comm model, agreed across ranks (self_profile.h).
#include "core/sync/self_profile.h"

#include <algorithm>
#include <stdexcept>

#include "core/common/clock.h"
#include "core/common/error.h"

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

LayerTimes SelfProfile::finish(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers) {
  const int L = int(sum_.size());
  LayerTimes t;
  t.backward_s.resize(size_t(L));
  for (int l = 0; l < L; ++l) t.backward_s[size_t(l)] = n_ ? sum_[size_t(l)] / n_ : 0;
  t.comm_s = measure_comm_model(dp, b, layers);
  agree_profile(dp, b, t.backward_s, t.comm_s);
  return t;
}

void agree_profile(DataPath& dp, Backend& b, std::vector<double>& bp, std::vector<double>& comm) {
  const size_t L = bp.size();
  if (comm.size() != L) throw std::invalid_argument("agree_profile: backward and comm times differ in length");
  std::vector<float> v(2 * L);
  for (size_t l = 0; l < L; ++l) v[l] = float(bp[l]), v[L + l] = float(comm[l]);
  dp.allreduce_host(b, v.data(), v.size(), ReduceOp::Avg)->wait();
  if (!dp.on_device()) {
    b.broadcast(v.data(), v.size(), 0)->wait();
  } else {  // the broadcast of rank 0's floats, as an allreduce of (rank 0's values, zeros elsewhere)
    if (b.rank() != 0) std::fill(v.begin(), v.end(), 0.0f);
    dp.allreduce_host(b, v.data(), v.size(), ReduceOp::Sum)->wait();
  }
  for (size_t l = 0; l < L; ++l) bp[l] = v[l], comm[l] = v[L + l];
}

void SelfProfile::save(ByteWriter& w) const {
  w.put_vec(sum_);
  w.put<int32_t>(n_);
}

void SelfProfile::load(ByteReader& r) {
  auto s = r.get_vec<double>();
  if (s.size() != sum_.size()) throw UsageError("checkpoint: engine state is for another model (profile)");
  sum_ = s;
  n_ = r.get<int32_t>();
}

std::vector<double> measure_comm_model(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers) {
  auto timed = [&](int64_t n) {
    // In arena space: on a device the timed collective includes its staging, as the real buckets do.
    const size_t len = size_t(std::max<int64_t>(n, 1));
    float* buf = dp.scratch(len);
    std::vector<double> ts;
    for (int i = 0; i < 4; ++i) {
      double t0 = now_s();
      dp.allreduce(b, buf, len, ReduceOp::Sum, -1)->wait();
      ts.push_back(now_s() - t0);
    }
    std::sort(ts.begin() + 1, ts.end());
    return ts[2];
  };
  const int64_t small = 256, large = 1 << 20;
  const double ts = timed(small), tl = timed(large);
  const double per_byte = std::max(0.0, (tl - ts) / double(4 * (large - small)));
  const double alpha = std::max(0.0, ts - per_byte * 4 * small);
  std::vector<double> c;
  for (auto& m : layers) c.push_back(alpha + per_byte * double(m.bytes));
  return c;
}

}  // namespace dd::sync
