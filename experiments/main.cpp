// dreamddp: one binary, sub-commands (CONTRACT.md). Maps errors to exit codes: usage 2, peer lost 3, else 1.
#include <cstdio>
#include <cstring>
#include <string>

#include <boost/program_options/errors.hpp>

#include "core/common/error.h"
#include "experiments/commands.h"

namespace {

const char* kUsage =
    "usage: dreamddp <command> [options]\n"
    "commands:\n"
    "  train      train a model on one or many ranks (DDP, Local SGD, PLSGD, DreamDDP, ...)\n"
    "  launch     start N local ranks, optionally on an emulated cluster (--netem)\n"
    "  bench      bench allreduce: nccl-tests style table of a backend\n"
    "  schedule   DreamDDP schedule solver on a per-layer profile\n"
    "  profile    measure per-layer backward and communication times (bp.json, comm.json)\n"
    "run 'dreamddp <command> --help' for its options\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "train") return dd::cli::cmd_train(argc - 1, argv + 1);
    if (cmd == "launch") return dd::cli::cmd_launch(argc - 1, argv + 1);
    if (cmd == "bench") return dd::cli::cmd_bench(argc - 1, argv + 1);
    if (cmd == "schedule") return dd::cli::cmd_schedule(argc - 1, argv + 1);
    if (cmd == "profile") return dd::cli::cmd_profile(argc - 1, argv + 1);
    std::fprintf(stderr, "dreamddp: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const dd::UsageError& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const dd::PeerLost& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", cmd.c_str(), e.what());
    return 3;
  } catch (const dd::AnomalyStop& e) {
    std::fprintf(stderr, "dreamddp %s: stopped: %s\n", cmd.c_str(), e.what());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
