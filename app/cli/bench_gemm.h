// `dreamddp bench gemm`: the GEMM rate of this build's ops, the figure every comparison with a peer sets beside
// the peer's own `gemm_gflops` (same shape: 64x1024 times 1024x1024, float32).
#pragma once

namespace dd::cli {
// argv[0] is "gemm". Prints one line per repetition and, last, one JSON line; returns the exit code.
int bench_gemm(int argc, char** argv);
// Its usage text (also printed by `dreamddp bench --help`).
extern const char* kGemmUsage;
}  // namespace dd::cli
