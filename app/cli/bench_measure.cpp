// measure_size: the timed iterations of one message size on this rank, then every rank's times and error counts
// gathered and reduced (max over ranks for times, sums for errors).
#include "app/cli/bench_measure.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "core/common/median.h"
#ifdef DREAMDDP_HAVE_NCCL
#include "backends/nccl/nccl_backend.h"
#endif

namespace dd::cli {
namespace {

// Buffer the collective runs on: host memory, or device memory for NCCL (filled from / checked on the host).
class BenchBuffer {
 public:
  BenchBuffer(size_t n, bool on_device) : n_(n), host_(n) {
#ifdef DREAMDDP_HAVE_NCCL
    if (on_device) dev_ = cuda_alloc_floats(n);
#else
    if (on_device) throw UsageError("bench: device buffers need the nccl backend, not compiled into this build");
#endif
  }
  ~BenchBuffer() {
#ifdef DREAMDDP_HAVE_NCCL
    if (dev_) cuda_free(dev_);
#endif
  }
  float* data() { return dev_ ? dev_ : host_.data(); }
  void load(const std::vector<float>& src) {
#ifdef DREAMDDP_HAVE_NCCL
    if (dev_) return cuda_copy_to_device(dev_, src.data(), n_);
#endif
    std::memcpy(host_.data(), src.data(), n_ * sizeof(float));
  }
  const std::vector<float>& fetch() {
#ifdef DREAMDDP_HAVE_NCCL
    if (dev_) cuda_copy_to_host(host_.data(), dev_, n_);
#endif
    return host_;
  }

 private:
  size_t n_;
  std::vector<float> host_;
  float* dev_ = nullptr;
};

long long count_wrong(const std::vector<float>& out, double rank_sum) {
  long long wrong = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != static_cast<float>(rank_sum * (i % 7 + 1))) ++wrong;
  return wrong;
}

// This rank's timed iterations and the wrong elements of the last (ours) and of the last bare one.
struct RankTimes {
  std::vector<double> times, bare_times;
  long long wrong = 0, bare_wrong = 0;
};

RankTimes time_iterations(Backend& be, const BenchArgs& a, size_t count,
                          const std::function<void(float*, size_t)>& bare) {
  const int n = be.size(), rank = be.rank();
  // Expected sums stay exact in float32 (below 2^24) for worlds up to ~2000 ranks.
  const double rank_sum = 0.5 * n * (n + 1);
  std::vector<float> pattern(count);
  for (size_t i = 0; i < count; ++i) pattern[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  BenchBuffer buf(count, a.device == "cuda" && a.backend == BackendKind::Nccl);
  RankTimes out;
  // Every iteration reduces the same input, so the last one can be checked exactly.
  auto time_ours = [&] {
    buf.load(pattern);
    be.barrier();  // start together: the time is the collective, not rank skew
    double t0 = now_s();
    be.allreduce(buf.data(), count, ReduceOp::Sum)->wait();
    return now_s() - t0;
  };
  auto time_bare = [&] {
    buf.load(pattern);
    be.barrier();
    double t0 = now_s();
    bare(buf.data(), count);
    double t = now_s() - t0;
    out.bare_wrong = count_wrong(buf.fetch(), rank_sum);
    return t;
  };
  for (int it = 0; it < a.warmup + a.iters; ++it) {
    // With --compare-bare the two alternate which goes first, so drift and cache state hit both alike; ours
    // always goes last in the final iteration so the buffer checked below is ours.
    const bool bare_first = bare && (a.warmup + a.iters - 1 - it) % 2 == 0;
    double tb = 0;
    if (bare_first) tb = time_bare();
    double t = time_ours();
    if (bare && !bare_first) tb = time_bare();
    if (it >= a.warmup) {
      out.times.push_back(t);
      if (bare) out.bare_times.push_back(tb);
    }
  }
  out.wrong = count_wrong(buf.fetch(), rank_sum);
  return out;
}

// "WRONG BARE_WRONG K t_1 .. t_K [b_1 .. b_K]": what every rank reports.
std::string rank_report(const RankTimes& t) {
  std::string report = std::to_string(t.wrong) + " " + std::to_string(t.bare_wrong) + " " +
                       std::to_string(t.times.size());
  char num[32];
  for (const auto* v : {&t.times, &t.bare_times})
    for (double x : *v) {
      std::snprintf(num, sizeof(num), " %.9e", x);
      report += num;
    }
  return report;
}

// Paired estimate: ours and bare of the same iteration ran back to back, so load that drifts over seconds
// (other processes on the machine) cancels in their ratio.
double paired_overhead_pct(const std::vector<double>& pair_ours, const std::vector<double>& pair_bare) {
  std::vector<double> ratio;
  for (size_t i = 0; i < pair_ours.size(); ++i)
    if (pair_bare[i] > 0) ratio.push_back(pair_ours[i] / pair_bare[i]);
  return ratio.empty() ? 0.0 : (median(ratio) - 1.0) * 100.0;
}

// Every rank's report, reduced: the figures are taken over ranks as documented in the header.
SizeResult reduce_over_ranks(Backend& be, const RankTimes& mine, size_t count, bool bare) {
  SizeResult r;
  r.count = count;
  const size_t k_mine = mine.times.size();
  std::vector<double> pair_ours(k_mine, 0.0), pair_bare(mine.bare_times.size(), 0.0);
  for (const auto& s : be.allgather(rank_report(mine))) {
    std::istringstream in(s);
    long long w = -1, wb = -1;
    size_t k = 0;
    in >> w >> wb >> k;
    std::vector<double> tr(k), br(bare ? k : 0);
    for (auto& x : tr) in >> x;
    for (auto& x : br) in >> x;
    if (!in || k != k_mine) throw std::runtime_error("bench: bad rank report");
    r.t = std::max(r.t, median(tr));
    r.tmin = std::max(r.tmin, *std::min_element(tr.begin(), tr.end()));
    for (size_t i = 0; i < k; ++i) pair_ours[i] = std::max(pair_ours[i], tr[i]);
    if (bare) {
      r.tb = std::max(r.tb, median(br));
      r.tbmin = std::max(r.tbmin, *std::min_element(br.begin(), br.end()));
      for (size_t i = 0; i < k; ++i) pair_bare[i] = std::max(pair_bare[i], br[i]);
    }
    r.wrong += w;
    r.bare_wrong += wb;
  }
  if (bare) r.overhead_pair_pct = paired_overhead_pct(pair_ours, pair_bare);
  return r;
}

}  // namespace

SizeResult measure_size(Backend& be, const BenchArgs& a, size_t count,
                        const std::function<void(float*, size_t)>& bare) {
  const RankTimes mine = time_iterations(be, a, count, bare);
  return reduce_over_ranks(be, mine, count, bool(bare));
}

}  // namespace dd::cli
