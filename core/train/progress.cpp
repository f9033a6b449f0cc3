// Progress implementation (stderr).
#include "core/train/progress.h"

#include <unistd.h>

#include <cstdio>

#include "base/clock.h"

namespace dd::train {

Progress::Progress(int64_t total_steps, int64_t every)
    : total_(total_steps), every_(every > 0 ? every : std::max<int64_t>(1, total_steps / 20)),
      tty_(isatty(STDERR_FILENO)) {}

void Progress::update(int64_t step, float loss, double sps, double exposed_frac, double elapsed_s) {
  const bool last = step + 1 == total_;
  double now = now_s();
  if (tty_) {
    if (!last && now - last_draw_ < 0.1) return;
  } else if (!last && (step + 1) % every_ != 0) {
    return;
  }
  last_draw_ = now;
  double eta = step + 1 > 0 ? elapsed_s / double(step + 1) * double(total_ - step - 1) : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  %.0f samples/s  exposed-comm %.1f%%  ETA %.0fs",
                (long long)(step + 1), (long long)total_, double(loss), sps, 100.0 * exposed_frac, eta);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", buf);
    dirty_ = true;
  } else {
    std::fprintf(stderr, "%s\n", buf);
  }
  std::fflush(stderr);
}

void Progress::message(const std::string& line) {
  if (tty_ && dirty_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  dirty_ = false;
}

void Progress::done() {
  if (tty_ && dirty_) std::fprintf(stderr, "\n");
  dirty_ = false;
}

}  // namespace dd::train
