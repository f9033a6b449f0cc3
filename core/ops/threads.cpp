// Compute-thread control: oneDNN in Debian is built with the OpenMP runtime, so one knob covers both, and the
// subnormal mode (base/fp_mode.h) set on OpenMP's workers is also the mode of oneDNN's.
#include <omp.h>

#include "base/error.h"
#include "base/fp_mode.h"
#include "core/ops/ops.h"

namespace dd::ops {

namespace {
// The calling thread and every worker of an OpenMP team of the current size: the pool that our kernels and
// oneDNN's use. Workers created later by a larger team are started by this thread and inherit its register.
void apply_to_pool() {
  apply_subnormals_here();
  const int n = omp_get_max_threads();
#pragma omp parallel num_threads(n)
  apply_subnormals_here();
}
}  // namespace

void set_threads(int n) {
  if (n < 1) throw UsageError("compute threads must be >= 1, got " + std::to_string(n));
  omp_set_num_threads(n);
  apply_to_pool();
}

int threads() { return omp_get_max_threads(); }

void set_subnormals(Subnormals s) {
  subnormals_mode.store(s);
  apply_to_pool();
}

}  // namespace dd::ops
