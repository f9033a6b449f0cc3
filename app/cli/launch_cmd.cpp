// `dreamddp launch`: the CLI entry point; all logic lives in app/launch (library dd_launch).
#include "app/commands.h"
#include "app/launch/launch.h"

namespace dd::cli {

int cmd_launch(int argc, char** argv) { return dd::launch::cli_main(argc, argv); }

}  // namespace dd::cli
