// The compute precision (base/precision.h) and whether this CPU can run bf16 through oneDNN.
#include <dnnl.hpp>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

bool bf16_supported() {
  // ISA values are bit sets, each a superset of the ones below it: avx512_core_bf16 and everything above (AMX).
  const auto bits = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (bits & need) == need;
}

std::string bf16_refusal() {
  if (bf16_supported()) return "";
  return "--precision bf16: this CPU has no bf16 instructions for oneDNN (avx512_bf16 or amx_bf16); use --precision fp32";
}

void set_precision(Precision p) {
  if (p == Precision::bf16 && !bf16_supported()) throw UsageError(bf16_refusal());
  precision_mode.store(p);
}

Precision precision() { return precision_mode.load(std::memory_order_relaxed); }

}  // namespace dd::ops
