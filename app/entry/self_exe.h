// The path of the running executable (/proc/self/exe): the launcher re-runs it for its ranks, `dreamddp simulate`
// finds `dreamddp-sim` beside it.
#pragma once
#include <string>

namespace dd::app {

// The running executable's path; throws std::runtime_error naming the cause when /proc/self/exe cannot be read.
std::string self_exe();

}  // namespace dd::app
