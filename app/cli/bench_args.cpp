// Command-line parsing of `dreamddp bench allreduce`: sizes with K/M/G suffixes, numbers checked, every option
// known by name.
#include "app/cli/bench_args.h"

#include <cctype>
#include <exception>
#include <string>

#include "base/error.h"

namespace dd::cli {
namespace {

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

// One option that takes a value (takes_value lists them), into `a`.
void apply_option(const std::string& key, const std::string& val, BenchArgs& a) {
  if (key == "--backend") {
    a.backend = parse_backend_kind(val, "bench: --backend: unknown backend");
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

}  // namespace

BenchArgs parse_bench_args(int argc, char** argv) {
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
    // takes_value is the one list of options: apply_option handles exactly those.
    if (!takes_value(key)) throw UsageError("bench: unknown option '" + key + "'" + kSeeHelp);
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("bench: option " + key + " needs a value" + kSeeHelp);
      val = argv[++i];
    }
    apply_option(key, val, a);
  }
  if (a.backend == BackendKind::Nccl) a.device = "cuda";
  if (a.compare_bare && a.backend != BackendKind::Gloo)
    throw UsageError("bench: --compare-bare compares with a bare gloo::allreduce, so it needs --backend gloo");
  return a;
}

}  // namespace dd::cli
