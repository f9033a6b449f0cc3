// dreamddp: one binary, sub-commands (docs/cli.md). Errors become exit codes in app/entry/run_command.cpp.
// `simulate` is handed to the dreamddp-sim executable beside this one (app/entry/sim_exec.h says why).
#include <cstdio>
#include <cstring>
#include <string>

#include "app/commands.h"
#include "app/entry/run_command.h"
#include "app/entry/sim_exec.h"

namespace {

const char* kUsage =
    "usage: dreamddp <command> [options]\n"
    "commands:\n"
    "  train      train a model on one or many ranks (DDP, Local SGD, PLSGD, DreamDDP, ...)\n"
    "  launch     start N local ranks, optionally on an emulated cluster (--netem)\n"
    "  bench      bench allreduce: nccl-tests style table of a backend; bench gemm: this build's GEMM rate\n"
    "  schedule   DreamDDP schedule solver on a per-layer profile\n"
    "  profile    measure per-layer backward and communication times (bp.json, comm.json)\n"
    "  simulate   the engine's policies on N simulated ranks over SimGrid (per-layer times from a profile)\n"
    "run 'dreamddp <command> --help' for its options\n";

dd::app::Command find_command(const std::string& cmd) {
  if (cmd == "train") return dd::cli::cmd_train;
  if (cmd == "launch") return dd::cli::cmd_launch;
  if (cmd == "bench") return dd::cli::cmd_bench;
  if (cmd == "schedule") return dd::cli::cmd_schedule;
  if (cmd == "profile") return dd::cli::cmd_profile;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "simulate") return dd::app::exec_simulator(argc - 1, argv + 1);
  const dd::app::Command fn = find_command(cmd);
  if (!fn) {
    std::fprintf(stderr, "dreamddp: error: unknown command '%s' (run 'dreamddp --help')\n",
                 dd::app::printable(cmd.c_str()).c_str());
    return 2;
  }
  return dd::app::run_command(cmd, fn, argc - 1, argv + 1);
}
