// dreamddp-sim: the executable behind `dreamddp simulate` (app/entry/sim_exec.h says why it is its own process).
// Run as `dreamddp-sim simulate ARGS` (what `dreamddp simulate` execs) or `dreamddp-sim ARGS`.
#include <cstring>

#include "app/commands.h"
#include "app/entry/run_command.h"

int main(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "simulate")) return dd::app::run_command("simulate", dd::cli::cmd_simulate,
                                                                                   argc - 1, argv + 1);
  argv[0] = const_cast<char*>("simulate");
  return dd::app::run_command("simulate", dd::cli::cmd_simulate, argc, argv);
}
