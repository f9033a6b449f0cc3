// Monotonic wall clock in seconds, shared by timing, telemetry and the sync timeline.
#pragma once
#include <chrono>

namespace dd {
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace dd
