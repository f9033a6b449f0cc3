// PausePoints: DREAMDDP_PAUSE_AFTER_STEPS read once, a SIGSTOP to this process at each listed step.
#include "core/train/pause_points.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace dd::train {

PausePoints::PausePoints() {
  const char* env = std::getenv("DREAMDDP_PAUSE_AFTER_STEPS");
  if (!env || !*env) return;
  const std::string s = env;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1)
      throw UsageError("DREAMDDP_PAUSE_AFTER_STEPS='" + s + "': expected steps N[,M...], each an integer >= 1");
    after_.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

void PausePoints::after_step(int64_t step) const {
  for (int64_t n : after_)
    if (step + 1 == n) std::raise(SIGSTOP);
}

}  // namespace dd::train
