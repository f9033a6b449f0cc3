// MPI (Open MPI) backend: factory. Run the program under mpirun; rank and world come from MPI itself.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace dd {

// Initializes MPI on first use (MPI_THREAD_MULTIPLE when the library provides it) and finalizes it at exit
// unless an operation failed (a failed collective cannot be completed, so MPI_Finalize would hang).
// Throws dd::UsageError when opts.world > 1 disagrees with the MPI world size.
std::unique_ptr<Backend> make_mpi_backend(const BackendOptions& opts);

}  // namespace dd
