// A testing hook for fault tests: DREAMDDP_PAUSE_AFTER_STEPS=N[,M...] makes each rank stop itself (SIGSTOP) once
// the step its progress line calls "step N/..." is done: its /steps row, checkpoint and evaluation written. A test
// waits until the ranks are stopped, kills or keeps some, and sends SIGCONT to the rest, so it acts at an exact
// step however fast the steps run (no kill after a sleep, no race with the end of the run). Unset: nothing.
#pragma once
#include <cstdint>
#include <vector>

namespace dd::train {

class PausePoints {
 public:
  // Reads the environment; a value that is not a list of positive integers is a UsageError.
  PausePoints();
  // Called after 0-based step `step` is complete.
  void after_step(int64_t step) const;

 private:
  std::vector<int64_t> after_;  // 1-based, as the progress line counts
};

}  // namespace dd::train
