// Command-line and INI parsing of `dreamddp train` (and `profile`, which takes the same options).
#pragma once
#include "core/train/config.h"

namespace dd::cli {

// Parses argv (argv[0] = sub-command) and --config FILE into cfg. Returns false when --help was printed.
// Unknown options, malformed values and unreadable config files throw (exit 2).
bool parse_train_options(int argc, char** argv, train::TrainConfig& cfg);

// Fills rank/world/local placement from the environment (torchrun, mpirun, Slurm).
void place_rank(train::TrainConfig& cfg);

}  // namespace dd::cli
