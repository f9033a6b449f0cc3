// Which steps a throughput figure times, for `train` and `simulate` alike: after a short warm-up, never before a
// self-profiling policy (dreamddp) has finished its lock-step profiling steps and any measured trial (those are
// not the policy's throughput), and for a periodic policy whole periods from a period boundary (each holds one
// average of every layer, whether the schedule averages at the start of the period, layer-wise, or at its end).
// A last period whose averages are left to the closing average (closing_period.h) holds none inside its steps: it is
// never timed.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/sync/policy/closing_period.h"
#include "core/sync/policy/policy.h"

namespace dd::sync {

struct TimedWindow {
  int64_t warm = 0;     // the first timed step
  int64_t end = -1;     // timed steps are [warm, end); -1: to the last step
  int64_t period = 0;   // the policy's period H (0: not periodic)
  int64_t periods = 0;  // whole periods in [warm, end) (0 when none fits)
};

// Fewer whole periods than this in the timed window: a throughput figure that rests on them is not a steady one.
constexpr int64_t kSteadyPeriods = 3;

// One line saying that the window holds fewer than kSteadyPeriods periods, naming its steps; empty when it holds
// enough (or the policy is not periodic). `steps`: the run's step count.
inline std::string timed_window_note(const TimedWindow& w, int64_t steps) {
  if (w.period <= 0 || w.periods >= kSteadyPeriods) return "";
  const int64_t end = w.end > w.warm ? w.end : steps;
  const std::string where = "steps " + std::to_string(w.warm) + "-" + std::to_string(end);
  if (w.periods == 0)
    return "samples/s rests on " + where + ", less than one period of " + std::to_string(w.period) +
           " steps after the warm-up: not a steady figure; run more steps";
  return "samples/s rests on " + std::to_string(w.periods) + " period" + (w.periods > 1 ? "s" : "") + " of " +
         std::to_string(w.period) + " steps (" + where + "), fewer than " + std::to_string(kSteadyPeriods) +
         ": not a steady figure; run more steps";
}

// `p` set up on the run's layers and world; the run's steps are [start, steps); `closing`: its last period's
// averages are left to the closing average where `p` allows it (--last-period local).
inline TimedWindow timed_window(const Policy& p, int64_t start, int64_t steps, bool closing) {
  TimedWindow w;
  const int64_t settled = p.settled_by(start);
  w.warm = start + std::min<int64_t>(5, (steps - start) / 10);
  if (settled > w.warm && settled < steps) w.warm = settled;
  if (const int64_t H = p.period(); H > 0) {
    w.period = H;
    const int64_t c = closing ? closing_period_start(p, steps - 1) : -1;
    const int64_t stop = c >= 0 ? std::min(steps, c) : steps;
    const int64_t first = (w.warm + H - 1) / H * H, end = first + std::max<int64_t>(0, stop - first) / H * H;
    if (end > first) w.warm = first, w.end = end, w.periods = (end - first) / H;
  }
  return w;
}

}  // namespace dd::sync
