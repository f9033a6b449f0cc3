// The options of `dreamddp bench allreduce`, read from its command line (docs/cli.md).
#pragma once
#include <cstddef>
#include <string>

#include "backends/backend.h"

namespace dd::cli {

// What to benchmark: backend and buffers, the sizes (doubling from min_bytes to max_bytes), iterations and
// rendezvous.
struct BenchArgs {
  BackendKind backend = BackendKind::Gloo;
  std::string device = "cpu";
  size_t min_bytes = 1024, max_bytes = 256u << 20;
  int iters = 20, warmup = 5;
  std::string rendezvous, iface;
  double timeout_s = 60;
  bool help = false;
  bool compare_bare = false;
};

// argv[1] must be "allreduce"; its options follow. Throws dd::UsageError naming a bad or unknown option. With
// --help, returns at once with `help` set.
BenchArgs parse_bench_args(int argc, char** argv);

}  // namespace dd::cli
