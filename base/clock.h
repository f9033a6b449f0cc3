// Monotonic clock in seconds, shared by timing, telemetry and the sync timeline. The real steady clock, unless a
// simulation sets its own (set_clock: `dreamddp simulate` runs the sync engine in SimGrid's simulated time).
#pragma once
#include <chrono>

namespace dd {
using ClockFn = double (*)();
inline ClockFn clock_override = nullptr;  // process-wide: one simulation per process
inline void set_clock(ClockFn fn) { clock_override = fn; }
inline double now_s() {
  if (clock_override) return clock_override();
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace dd
