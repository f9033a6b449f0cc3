// `dreamddp bench allreduce`: nccl-tests style allreduce benchmark over any backend, with a correctness check
// per size and a JSON summary as rank 0's last line (docs/cli.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "app/cli/bench_gemm.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/common/median.h"
#include "app/commands.h"
#ifdef DREAMDDP_HAVE_NCCL
#include "backends/nccl/nccl_backend.h"
#endif
#ifdef DREAMDDP_HAVE_GLOO
#include "backends/gloo/gloo_backend.h"
#endif

namespace dd::cli {
namespace {

const char* kUsage =
    "usage: dreamddp bench allreduce [--backend gloo|mpi|nccl] [--sizes MIN:MAX|SIZE] [--iters N] [--warmup N]\n"
    "                                [--rendezvous file:///dir|redis://host:port] [--iface NAME] [--timeout S]\n"
    "                                [--device cpu|cuda] [--threads N] [--compare-bare]\n"
    "  --compare-bare (gloo): also time a bare gloo::allreduce on the same buffers and context, interleaved\n"
    "  with ours, and print its time and our overhead in percent\n"
    "  sizes in bytes with K/M/G suffixes (powers of 1024), doubling from MIN to MAX (default 1K:256M);\n"
    "  rank/world from RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, or SLURM_*; rendezvous default $DREAMDDP_RENDEZVOUS\n";

struct BenchArgs {
  std::string backend = "gloo";
  std::string device = "cpu";
  size_t min_bytes = 1024, max_bytes = 256u << 20;
  int iters = 20, warmup = 5;
  std::string rendezvous, iface;
  double timeout_s = 60;
  bool help = false;
  bool compare_bare = false;
};

size_t parse_size(const std::string& s) {
  if (s.empty()) throw UsageError("bench: empty size in --sizes");
  size_t mult = 1;
  std::string num = s;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    mult = last == 'K' ? (1u << 10) : last == 'M' ? (1u << 20) : (size_t(1) << 30);
    num = s.substr(0, s.size() - 1);
  } else if (last == 'B') {
    num = s.substr(0, s.size() - 1);
  }
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(num, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != num.size() || v == 0)
    throw UsageError("bench: size '" + s + "' is not a positive byte count like 4096, 64K, 256M");
  size_t bytes = static_cast<size_t>(v) * mult;
  if (bytes < sizeof(float)) throw UsageError("bench: size '" + s + "' is smaller than one float (4 bytes)");
  return bytes;
}

double parse_double(const std::string& opt, const std::string& v) {
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw UsageError("bench: " + opt + " '" + v + "' is not a number");
}

int parse_int(const std::string& opt, const std::string& v, int lo) {
  double d = parse_double(opt, v);
  if (d != static_cast<int>(d) || d < lo)
    throw UsageError("bench: " + opt + " '" + v + "' must be an integer >= " + std::to_string(lo));
  return static_cast<int>(d);
}

const char* kSeeHelp = " (see dreamddp bench allreduce --help)";

bool takes_value(const std::string& key) {
  for (const char* k : {"--backend", "--sizes", "--iters", "--warmup", "--rendezvous", "--iface", "--timeout",
                        "--device", "--threads"})
    if (key == k) return true;
  return false;
}

BenchArgs parse(int argc, char** argv) {
  BenchArgs a;
  if (argc < 2) throw UsageError("bench: which benchmark? 'allreduce' or 'gemm' (see dreamddp bench --help)");
  if (std::string(argv[1]) != "allreduce")
    throw UsageError("bench: unknown benchmark '" + std::string(argv[1]) +
                     "' (expected 'allreduce' or 'gemm'; see dreamddp bench --help)");
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i], val;
    if (key == "--help" || key == "-h") {
      a.help = true;
      return a;
    }
    if (key == "--compare-bare") {
      a.compare_bare = true;
      continue;
    }
    if (key.rfind("--", 0) != 0) throw UsageError("bench: unexpected argument '" + key + "'" + kSeeHelp);
    const auto eq = key.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      val = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    // takes_value is the one list of options: the dispatch below handles exactly those.
    if (!takes_value(key)) throw UsageError("bench: unknown option '" + key + "'" + kSeeHelp);
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("bench: option " + key + " needs a value" + kSeeHelp);
      val = argv[++i];
    }
    if (key == "--backend") {
      if (val != "gloo" && val != "mpi" && val != "nccl")
        throw UsageError("bench: --backend '" + val + "' is not one of gloo, mpi, nccl");
      a.backend = val;
    } else if (key == "--sizes") {
      auto colon = val.find(':');
      a.min_bytes = parse_size(val.substr(0, colon));
      a.max_bytes = colon == std::string::npos ? a.min_bytes : parse_size(val.substr(colon + 1));
      if (a.max_bytes < a.min_bytes) throw UsageError("bench: --sizes '" + val + "': MAX is below MIN");
    } else if (key == "--iters") {
      a.iters = parse_int(key, val, 1);
    } else if (key == "--warmup") {
      a.warmup = parse_int(key, val, 0);
    } else if (key == "--rendezvous") {
      a.rendezvous = val;
    } else if (key == "--iface") {
      a.iface = val;
    } else if (key == "--timeout") {
      a.timeout_s = parse_double(key, val);
      if (!(a.timeout_s > 0)) throw UsageError("bench: --timeout must be positive seconds");
    } else if (key == "--device") {
      if (val != "cpu" && val != "cuda") throw UsageError("bench: --device '" + val + "' is not cpu or cuda");
      a.device = val;
    } else if (key == "--threads") {
      parse_int(key, val, 1);  // accepted for option compatibility with train; the bench does no compute
    }
  }
  if (a.backend == "nccl") a.device = "cuda";
  if (a.compare_bare && a.backend != "gloo")
    throw UsageError("bench: --compare-bare compares with a bare gloo::allreduce, so it needs --backend gloo");
  return a;
}

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

// The bare gloo::allreduce for --compare-bare, or a UsageError when this build/backend cannot give one.
std::function<void(float*, size_t)> bare_allreduce_of(Backend& be) {
#ifdef DREAMDDP_HAVE_GLOO
  if (auto f = gloo_bare_allreduce(be)) return f;
#endif
  throw UsageError("bench: --compare-bare needs the gloo backend (not compiled into this build or not in use)");
}

long long count_wrong(const std::vector<float>& out, double rank_sum) {
  long long wrong = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != static_cast<float>(rank_sum * (i % 7 + 1))) ++wrong;
  return wrong;
}

// Connect: the backend the ranks benchmark, from the rendezvous of `launch` or --rendezvous.
std::unique_ptr<Backend> connect_bench(const BenchArgs& a, const RankInfo& ri) {
  BackendOptions bo;
  bo.kind = a.backend;
  bo.rank = ri.rank;
  bo.world = ri.world;
  bo.rendezvous = resolve_rendezvous(a.rendezvous, "");
  if (bo.rendezvous.empty() && ri.world > 1 && a.backend != "mpi")
    throw UsageError("bench: " + std::to_string(ri.world) + " ranks (from " + ri.source +
                     ") need a rendezvous: pass --rendezvous file:///shared/dir or redis://host:port, "
                     "or start the ranks with `dreamddp launch`");
  bo.iface = a.iface;
  bo.timeout_s = a.timeout_s;
  bo.prefix = "dd-bench";
  return make_backend(bo);
}

// One message size, measured on every rank and reduced over ranks (the same figures on each).
struct SizeResult {
  size_t count = 0;
  double t = 0, tb = 0, tmin = 0, tbmin = 0;  // median and fastest iteration, ours and bare; max over ranks
  double overhead_pair_pct = 0;
  long long wrong = 0, bare_wrong = 0;        // summed over ranks
  bool ok() const { return wrong == 0 && bare_wrong == 0; }
  double bytes() const { return static_cast<double>(count * sizeof(float)); }
  double algbw() const { return t > 0 ? bytes() / t / 1e9 : 0.0; }
  double busbw(int n) const { return n > 1 ? algbw() * 2.0 * (n - 1) / n : 0.0; }
  double overhead_pct() const { return tb > 0 ? (t / tb - 1.0) * 100.0 : 0.0; }
  double overhead_min_pct() const { return tbmin > 0 ? (tmin / tbmin - 1.0) * 100.0 : 0.0; }
};

SizeResult measure_size(Backend& be, const BenchArgs& a, size_t count,
                        const std::function<void(float*, size_t)>& bare) {
  const int n = be.size(), rank = be.rank();
  // Expected sums stay exact in float32 (below 2^24) for worlds up to ~2000 ranks.
  const double rank_sum = 0.5 * n * (n + 1);
  std::vector<float> pattern(count);
  for (size_t i = 0; i < count; ++i) pattern[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  BenchBuffer buf(count, a.device == "cuda" && a.backend == "nccl");
  std::vector<double> times, bare_times;
  long long bare_wrong = 0;
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
    bare_wrong = count_wrong(buf.fetch(), rank_sum);
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
      times.push_back(t);
      if (bare) bare_times.push_back(tb);
    }
  }
  const long long wrong = count_wrong(buf.fetch(), rank_sum);
  // Every rank reports its per-iteration times; the figures are taken over ranks as documented in the header.
  std::string report = std::to_string(wrong) + " " + std::to_string(bare_wrong) + " " + std::to_string(times.size());
  char num[32];
  for (const auto* v : {&times, &bare_times})
    for (double x : *v) {
      std::snprintf(num, sizeof(num), " %.9e", x);
      report += num;
    }
  SizeResult r;
  r.count = count;
  std::vector<double> pair_ours(times.size(), 0.0), pair_bare(bare_times.size(), 0.0);
  for (const auto& s : be.allgather(report)) {
    std::istringstream in(s);
    long long w = -1, wb = -1;
    size_t k = 0;
    in >> w >> wb >> k;
    std::vector<double> tr(k), br(bare ? k : 0);
    for (auto& x : tr) in >> x;
    for (auto& x : br) in >> x;
    if (!in || k != times.size()) throw std::runtime_error("bench: bad rank report");
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
  // Paired estimate: ours and bare of the same iteration ran back to back, so load that drifts over seconds
  // (other processes on the machine) cancels in their ratio.
  if (bare) {
    std::vector<double> ratio;
    for (size_t i = 0; i < pair_ours.size(); ++i)
      if (pair_bare[i] > 0) ratio.push_back(pair_ours[i] / pair_bare[i]);
    if (!ratio.empty()) r.overhead_pair_pct = (median(ratio) - 1.0) * 100.0;
  }
  return r;
}

// Print: the header, one row per size as it completes (a progress line on long sweeps), its JSON record.
void print_header(const BenchArgs& a, const Backend& be, const RankInfo& ri, bool bare) {
  std::printf("# dreamddp bench allreduce: backend %s, world %d (%s), %s buffers, float32 sum in place\n",
              be.name().c_str(), be.size(), ri.source.c_str(), a.device == "cuda" ? "device" : "host");
  std::printf("# %d warm-up + %d timed iterations per size; time = median over iterations, max over ranks;\n"
              "# algbw = bytes/time, busbw = algbw*2(n-1)/n, GB = 1e9 bytes\n",
              a.warmup, a.iters);
  if (bare)
    std::printf("# bare = gloo::allreduce on the same context, algorithm and buffer, called on this thread\n"
                "# (no queue); interleaved with ours, order alternating per iteration. overhead = ours/bare - 1 on\n"
                "# the medians; ovh-pair = median over iterations of ours_i/bare_i - 1 (each time max over ranks;\n"
                "# the pair ran back to back, so slow load drift cancels); ovh-min on the fastest iteration of\n"
                "# each. #wrong counts wrong elements of both\n");
  std::printf("#\n# %12s %12s %12s %12s %12s %8s", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
              "#wrong");
  if (bare) std::printf(" %12s %11s %11s %11s", "bare(us)", "overhead(%)", "ovh-pair(%)", "ovh-min(%)");
  std::printf("\n");
  std::fflush(stdout);
}

void print_row(const SizeResult& r, int n, bool bare) {
  std::printf("  %12zu %12zu %12.1f %12.3f %12.3f %8lld", r.count * sizeof(float), r.count, r.t * 1e6, r.algbw(),
              r.busbw(n), r.wrong + r.bare_wrong);
  if (bare)
    std::printf(" %12.1f %11.1f %11.1f %11.1f", r.tb * 1e6, r.overhead_pct(), r.overhead_pair_pct,
                r.overhead_min_pct());
  std::printf("\n");
  std::fflush(stdout);
}

nlohmann::json row_json(const SizeResult& r, int n, bool bare) {
  nlohmann::json j = {{"bytes", r.count * sizeof(float)},
                      {"time_s", r.t},
                      {"algbw_GBps", r.algbw()},
                      {"busbw_GBps", r.busbw(n)},
                      {"ok", r.ok()}};
  if (bare) {
    j["bare_time_s"] = r.tb;
    j["overhead_pct"] = r.overhead_pct();
    j["min_time_s"] = r.tmin;
    j["bare_min_time_s"] = r.tbmin;
    j["overhead_min_pct"] = r.overhead_min_pct();
    j["overhead_pair_pct"] = r.overhead_pair_pct;
  }
  return j;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "gemm") return bench_gemm(argc - 1, argv + 1);
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    std::fputs(kGemmUsage, stdout);
    return 0;
  }
  BenchArgs a = parse(argc, argv);
  if (a.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const RankInfo ri = discover_rank();
  auto be = connect_bench(a, ri);
  const int n = be->size();
  const bool lead = be->rank() == 0;
  std::function<void(float*, size_t)> bare;
  if (a.compare_bare) bare = bare_allreduce_of(*be);
  const bool with_bare = bool(bare);
  if (lead) print_header(a, *be, ri, with_bare);

  nlohmann::json results = nlohmann::json::array();
  bool all_ok = true;
  double sum_ours = 0, sum_bare = 0;  // medians summed over sizes, for --compare-bare's one-number summary
  for (size_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    const SizeResult r = measure_size(*be, a, bytes / sizeof(float), bare);
    sum_ours += r.t;
    sum_bare += r.tb;
    all_ok = all_ok && r.ok();
    if (lead) print_row(r, n, with_bare);
    results.push_back(row_json(r, n, with_bare));
    if (bytes > a.max_bytes / 2) break;  // doubling must not overflow past MAX
  }
  if (lead) {
    nlohmann::json summary = {{"backend", be->name()}, {"world", n}, {"results", results}};
    if (with_bare && sum_bare > 0) {
      const double total_pct = (sum_ours / sum_bare - 1.0) * 100.0;
      std::printf("# all sizes: ours %.1f us, bare %.1f us (sums of the medians): overhead %.1f%%\n", sum_ours * 1e6,
                  sum_bare * 1e6, total_pct);
      summary["overhead_total_pct"] = total_pct;
    }
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }
  if (!all_ok) {
    std::fprintf(stderr, "bench: rank %d: allreduce results were wrong (see #wrong); the backend is broken\n",
                 be->rank());
    return 1;
  }
  return 0;
}

}  // namespace dd::cli
