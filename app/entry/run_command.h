// The one place where a sub-command's exceptions become the exit codes of docs/cli.md (usage 2, peer lost 3,
// anomaly stop 4, else 1), shared by the `dreamddp` and `dreamddp-sim` executables so both speak alike.
#pragma once
#include <string>

namespace dd::app {

using Command = int (*)(int argc, char** argv);

// Runs `fn(argc, argv)` (argv[0] is the sub-command name) and maps what it throws to one line on stderr,
// "dreamddp NAME: error: ...", and the exit code.
int run_command(const std::string& name, Command fn, int argc, char** argv);

// `msg` with control bytes escaped as \xNN, so user input echoed in an error stays one line.
std::string printable(const char* msg);

}  // namespace dd::app
