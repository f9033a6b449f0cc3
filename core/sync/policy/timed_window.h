// Which steps a throughput figure times, for `train` and `simulate` alike: after a short warm-up, never before a
// self-profiling policy (dreamddp) has finished its lock-step profiling steps and any measured trial (those are
// not the policy's throughput), and for a periodic policy whole periods from a period boundary (each holds one
// average of every layer, whether the schedule averages at the start of the period, layer-wise, or at its end).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/sync/policy/policy.h"

namespace dd::sync {

struct TimedWindow {
  int64_t warm = 0;  // the first timed step
  int64_t end = -1;  // timed steps are [warm, end); -1: to the last step
};

// `p` set up on the run's layers and world; the run's steps are [start, steps).
inline TimedWindow timed_window(const Policy& p, int64_t start, int64_t steps) {
  TimedWindow w;
  const int64_t settled = p.settled_by(start);
  w.warm = start + std::min<int64_t>(5, (steps - start) / 10);
  if (settled > w.warm && settled < steps) w.warm = settled;
  if (const int64_t H = p.period(); H > 0) {
    const int64_t first = (w.warm + H - 1) / H * H, end = first + (steps - first) / H * H;
    if (end > first) w.warm = first, w.end = end;
  }
  return w;
}

}  // namespace dd::sync
