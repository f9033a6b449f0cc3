#include "app/entry/self_exe.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>

namespace dd::app {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe: " + std::string(strerror(errno)));
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace dd::app
