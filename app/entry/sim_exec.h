// `dreamddp simulate` runs in its own executable, `dreamddp-sim`, built beside `dreamddp`: SimGrid's SMPI exports
// MPI_Init and the rest of the MPI API, so a process that links SimGrid cannot also use Open MPI (its MPI_Init
// would bind to SimGrid's and abort under mpirun). The training binary never links SimGrid; this hands over.
#pragma once

namespace dd::app {

// Replaces this process with `dreamddp-sim simulate ARGS...` (argv[0] is "simulate"); returns only on failure,
// after printing one line, with exit code 1.
int exec_simulator(int argc, char** argv);

}  // namespace dd::app
