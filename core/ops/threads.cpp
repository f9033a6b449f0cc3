// Compute-thread control: oneDNN in Debian is built with the OpenMP runtime, so one knob covers both.
#include <omp.h>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

void set_threads(int n) {
  if (n < 1) throw UsageError("compute threads must be >= 1, got " + std::to_string(n));
  omp_set_num_threads(n);
}

int threads() { return omp_get_max_threads(); }

}  // namespace dd::ops
