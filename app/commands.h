// Sub-commands of the `dreamddp` binary; each returns the process exit code (docs/cli.md) or throws a
// dd::UsageError / dd::PeerLost that main() maps to 2 / 3. argv[0] is the sub-command name.
#pragma once

namespace dd::cli {
int cmd_train(int argc, char** argv);
int cmd_schedule(int argc, char** argv);
int cmd_profile(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_launch(int argc, char** argv);
int cmd_simulate(int argc, char** argv);  // in the dreamddp-sim executable only
}  // namespace dd::cli
