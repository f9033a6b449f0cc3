// Runs short system tools (ip, tc) without a shell and captures what they print, for the netem set-up.
#pragma once
#include <string>
#include <vector>

namespace dd::netem {

struct CommandResult {
  int status = -1;      // exit status, 128+signal when killed, -1 when it could not be started
  std::string output;   // stdout and stderr together
};

// Runs argv[0] (searched on PATH) with the other entries as arguments and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

// Like run_command, but throws std::runtime_error naming the command and its output when it fails.
void must_run(const std::vector<std::string>& argv);

// "ip netns add x" style rendering for messages.
std::string join_command(const std::vector<std::string>& argv);

// Absolute path of an executable: `name` itself when it contains a '/', else the first match on PATH.
// Empty when there is none.
std::string find_executable(const std::string& name);

}  // namespace dd::netem
