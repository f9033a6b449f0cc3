// `dreamddp launch`: the CLI entry point; all logic lives in experiments/launch (library dd_launch).
#include "experiments/commands.h"
#include "experiments/launch/launch.h"

namespace dd::cli {

int cmd_launch(int argc, char** argv) { return dd::launch::cli_main(argc, argv); }

}  // namespace dd::cli
