// `dreamddp bench allreduce`: nccl-tests style allreduce benchmark over any backend, with a correctness check
// per size and a JSON summary as rank 0's last line (docs/cli.md).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/bench_args.h"
#include "app/cli/bench_gemm.h"
#include "app/cli/bench_measure.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "base/error.h"
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

// The bare gloo::allreduce for --compare-bare, or a UsageError when this build/backend cannot give one.
std::function<void(float*, size_t)> bare_allreduce_of(Backend& be) {
#ifdef DREAMDDP_HAVE_GLOO
  if (auto f = gloo_bare_allreduce(be)) return f;
#endif
  throw UsageError("bench: --compare-bare needs the gloo backend (not compiled into this build or not in use)");
}

// Connect: the backend the ranks benchmark, from the rendezvous of `launch` or --rendezvous.
std::unique_ptr<Backend> connect_bench(const BenchArgs& a, const RankInfo& ri) {
  BackendOptions bo;
  bo.kind = a.backend;
  bo.rank = ri.rank;
  bo.world = ri.world;
  bo.rendezvous = resolve_rendezvous(a.rendezvous, "");
  if (bo.rendezvous.empty() && ri.world > 1 && a.backend != BackendKind::Mpi)
    throw UsageError("bench: " + std::to_string(ri.world) + " ranks (from " + ri.source +
                     ") need a rendezvous: pass --rendezvous file:///shared/dir or redis://host:port, "
                     "or start the ranks with `dreamddp launch`");
  bo.iface = a.iface;
  bo.timeout_s = a.timeout_s;
  bo.prefix = "dd-bench";
  return make_backend(bo);
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
  BenchArgs a = parse_bench_args(argc, argv);
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
