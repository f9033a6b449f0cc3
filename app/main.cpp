// dreamddp: one binary, sub-commands (docs/cli.md). Maps errors to exit codes: usage 2, peer lost 3, else 1.
#include <cstdio>
#include <cstring>
#include <string>

#include <boost/program_options/errors.hpp>

#include "base/error.h"
#include "app/commands.h"

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

// One line, printable: control bytes of user input echoed in a message are escaped as \xNN.
std::string printable(const char* msg) {
  std::string out;
  for (const char* p = msg; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

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
    if (cmd == "simulate") return dd::cli::cmd_simulate(argc - 1, argv + 1);
    std::fprintf(stderr, "dreamddp: error: unknown command '%s' (run 'dreamddp --help')\n", printable(cmd.c_str()).c_str());
    return 2;
  } catch (const dd::UsageError& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", printable(cmd.c_str()).c_str(), printable(e.what()).c_str());
    return 2;
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", printable(cmd.c_str()).c_str(), printable(e.what()).c_str());
    return 2;
  } catch (const dd::PeerLost& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", printable(cmd.c_str()).c_str(), printable(e.what()).c_str());
    return 3;
  } catch (const dd::AnomalyStop& e) {
    std::fprintf(stderr, "dreamddp %s: stopped: %s\n", printable(cmd.c_str()).c_str(), printable(e.what()).c_str());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dreamddp %s: error: %s\n", printable(cmd.c_str()).c_str(), printable(e.what()).c_str());
    return 1;
  }
}
