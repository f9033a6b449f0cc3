// Compute precision of the GEMMs and convolutions (--precision fp32|bf16). bf16: their inputs (activations,
// weights, gradients flowing back) are rounded to bfloat16 (8 significant bits, round to nearest even) and the
// products accumulate in fp32 into fp32 outputs; master weights, optimizer state, every other kernel, the
// reductions and the communication stay fp32. Process-wide like the subnormal mode (fp_mode.h): set once by the
// CLI (dd::ops::set_precision) before the first kernel runs, read by the kernels when they build a primitive.
#pragma once
#include <atomic>

namespace dd {

enum class Precision { fp32, bf16 };

inline const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

// The process's compute precision; fp32 unless set otherwise.
inline std::atomic<Precision> precision_mode{Precision::fp32};

}  // namespace dd
