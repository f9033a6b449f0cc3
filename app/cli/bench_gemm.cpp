// `dreamddp bench gemm [--m M] [--k K] [--n N] [--threads T] [--seconds S]`: C = A(MxK) B(KxN) through dd::ops::gemm,
// timed like the peer times its own (a few warm-up calls, then as many calls as fit in S seconds), so the two
// rates are comparable: torch_ddp.py measures a @ b with a 64x1024, b 1024x1024.
#include "app/cli/bench_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::cli {

const char* kGemmUsage =
    "usage: dreamddp bench gemm [--m 64] [--k 1024] [--n 1024] [--threads 1] [--seconds 0.3]\n"
    "  float32 C = A(MxK) B(KxN) through this build's GEMM; prints GFLOP/s (1e9 FLOP = 2MNK per call), last line JSON\n";

namespace {

int64_t int_arg(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || x < lo || x > hi)
    throw UsageError("bench gemm: " + opt + " '" + v + "' must be an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return x;
}

}  // namespace

int bench_gemm(int argc, char** argv) {
  int64_t M = 64, K = 1024, N = 1024, threads = 1;
  double seconds = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--help" || key == "-h") {
      std::fputs(kGemmUsage, stdout);
      return 0;
    }
    if (key != "--m" && key != "--k" && key != "--n" && key != "--threads" && key != "--seconds")
      throw UsageError("bench gemm: unknown option '" + key + "' (see dreamddp bench gemm --help)");
    if (i + 1 >= argc) throw UsageError("bench gemm: " + key + " needs a value (see dreamddp bench gemm --help)");
    const std::string v = argv[++i];
    if (key == "--m") M = int_arg(key, v, 1, 1 << 16);
    else if (key == "--k") K = int_arg(key, v, 1, 1 << 16);
    else if (key == "--n") N = int_arg(key, v, 1, 1 << 16);
    else if (key == "--threads") threads = int_arg(key, v, 1, 1024);
    else if (key == "--seconds") {
      size_t used = 0;
      try {
        seconds = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty() || !(seconds >= 0.01 && seconds <= 60))
        throw UsageError("bench gemm: --seconds '" + v + "' must be a number in [0.01, 60]");
    }
  }
  if (double(M) * double(K) + double(K) * double(N) + double(M) * double(N) > 2e8)
    throw UsageError("bench gemm: matrices of " + std::to_string(M) + "x" + std::to_string(K) + "x" +
                     std::to_string(N) + " need more than 800 MB; pick smaller --m/--k/--n");
  ops::set_threads(int(threads));
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> A(size_t(M * K)), B(size_t(K * N)), C(size_t(M * N));
  for (auto& x : A) x = d(rng);
  for (auto& x : B) x = d(rng);
  auto call = [&] { ops::gemm(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N); };
  for (int w = 0; w < 3; ++w) call();
  // Best of three windows: the rate this build reaches, as the peer reports its own.
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    long long n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double dt = 0;
    do {
      call();
      ++n;
      dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (dt < seconds);
    const double g = 2.0 * double(M) * double(N) * double(K) * double(n) / dt / 1e9;
    std::printf("gemm %lldx%lldx%lld, %lld thread(s): %lld calls in %.3f s, %.1f GFLOP/s\n", (long long)M,
                (long long)K, (long long)N, (long long)threads, n, dt, g);
    best = std::max(best, g);
  }
  std::printf("{\"bench\": \"gemm\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"threads\": %lld, \"gemm_gflops\": %.1f}\n",
              (long long)M, (long long)K, (long long)N, (long long)threads, best);
  return 0;
}

}  // namespace dd::cli
