// `dreamddp launch`: starts N local ranks (torchrun-style), optionally each in its own network namespace with
// tc-shaped links, forwards signals, and takes the whole job down when one rank dies.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/netem/netem_spec.h"

namespace dd::launch {

using netem::NetemSpec;  // --netem RATE[,delay=D][,loss=P], parsed by parse_netem below

struct LaunchOptions {
  int nprocs = 0;                    // number of local ranks (-n; nodes * ranks_per_node with --nodes)
  int nodes = 0;                     // --nodes AxB: A emulated nodes (0 = not given) ...
  int ranks_per_node = 0;            // ... of B consecutive ranks each
  std::optional<NetemSpec> netem;    // emulated cluster when set (needs root)
  std::string rendezvous;            // DREAMDDP_RENDEZVOUS for the ranks; empty = fresh file:// temp dir
  std::string iface_prefix = "dd";   // prefix of the bridge / veth / namespace names we create (1-4 chars)
  double grace_s = 10;               // SIGTERM -> SIGKILL grace period when taking the job down
  int master_port = 0;               // MASTER_PORT; 0 = a free loopback port (29500 inside namespaces)
  std::string self_exe;              // binary that runs dreamddp sub-commands; empty = /proc/self/exe
  int max_restarts = 0;              // --max-restarts R: restart `train` from its newest complete checkpoint
};

// --max-restarts (restart.cpp, docs/elastic.md): the run directory and the command of a restart.
struct RestartPlan {
  std::string dir;                 // the train command's --out (or its --resume when there is no --out)
  std::vector<std::string> argv;   // the original command, argv[0] included
};

// Checks that `cmd` (after `--`) is a `train` with --checkpoint-every K > 0 and --out (or --resume). Throws
// dd::UsageError naming what is missing.
RestartPlan plan_restarts(const std::vector<std::string>& cmd, const std::vector<std::string>& argv);

// The newest step of which all `world` ranks' checkpoint files in `dir` are present and intact (-1: none).
int64_t newest_complete_checkpoint(const std::string& dir, int world);

// The command of a restart: the original with any --resume/--overwrite replaced by --resume DIR when a complete
// checkpoint exists (step >= 0); else the original, with --overwrite unless it resumes (a fresh start over the
// failed attempt's own output).
std::vector<std::string> restart_argv(const RestartPlan& plan, int64_t step);

// Parsed command line: options plus the command after `--`. help = true means -h/--help was given.
struct ParsedArgs {
  LaunchOptions options;
  std::vector<std::string> command;
  bool help = false;
};

// Parses "RATE[,delay=D][,loss=P]" (RATE like 100mbit, 1gbit, 10gbit; D like 500us, 2ms; P like 0.1 or 0.1%).
// Throws dd::UsageError with a message naming the bad part.
NetemSpec parse_netem(const std::string& spec);

// Parses "AxB" (A nodes of B ranks, e.g. 2x2; also "2X2"). Throws dd::UsageError naming the bad part.
void parse_nodes(const std::string& spec, int* nodes, int* ranks_per_node);

// Parses the arguments after "launch" (argv[0] is "launch"). Throws dd::UsageError on bad usage.
ParsedArgs parse_args(int argc, char** argv);

// The usage text of `dreamddp launch`.
const char* usage();

// Runs the job and returns the launcher's exit status: 0, the first failing rank's status (128+signal for a
// rank killed by a signal), or 128+signal when the launcher itself was interrupted and every rank exited 0.
// With --nodes AxB (or --netem alone: one node per rank) every node is a host of its own: with --netem one
// network namespace per node, shared by its ranks, and every rank sees the host name ddnode<node>.
// cmd[0] that is a dreamddp sub-command (train, bench, profile, schedule) runs this binary; anything else is an
// external program (found on PATH unless it contains a '/'). Throws dd::UsageError for unusable options.
int run(const LaunchOptions& options, const std::vector<std::string>& cmd);

// parse_args + run; prints usage for --help. What `dreamddp launch` calls.
int cli_main(int argc, char** argv);

}  // namespace dd::launch
