// Hands `dreamddp simulate` to the `dreamddp-sim` executable beside this one (sim_exec.h says why).
#include "app/entry/sim_exec.h"
#include "app/entry/self_exe.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <unistd.h>

namespace dd::app {

namespace {
// The directory of the running executable ("" when /proc/self/exe cannot be read).
std::string self_dir() {
  std::string path;
  try {
    path = self_exe();
  } catch (const std::exception&) {
    return "";
  }
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}
}  // namespace

int exec_simulator(int argc, char** argv) {
  const std::string exe = self_dir() + "/dreamddp-sim";
  std::vector<char*> args;
  args.push_back(const_cast<char*>(exe.c_str()));
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);  // argv[0] is "simulate"
  args.push_back(nullptr);
  execv(exe.c_str(), args.data());
  const int err = errno;
  std::fprintf(stderr, "dreamddp simulate: error: cannot run the simulator %s: %s (it is built beside dreamddp by "
               "'make build')\n", exe.c_str(), std::strerror(err));
  return 1;
}

}  // namespace dd::app
