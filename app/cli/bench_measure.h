// One message size of `dreamddp bench allreduce`: timed on every rank (ours, and with --compare-bare a bare
// gloo::allreduce interleaved with it), checked for correctness, and reduced over ranks.
#pragma once
#include <cstddef>
#include <functional>

#include "app/cli/bench_args.h"
#include "backends/backend.h"

namespace dd::cli {

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

// Collective over every rank of `be`: each rank must call it with the same arguments. `bare` (may be empty) is
// the bare all-reduce to compare with.
SizeResult measure_size(Backend& be, const BenchArgs& a, size_t count,
                        const std::function<void(float*, size_t)>& bare);

}  // namespace dd::cli
