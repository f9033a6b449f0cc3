// Defaults of optional Backend operations.
#include "backends/backend.h"
#include "base/error.h"

namespace dd {

WorkPtr Backend::run_bytes(std::function<void(ByteChannel&)>, const char* what, size_t) {
  throw UsageError(name() + ": " + what + " needs a host byte channel, which this backend does not have (use gloo or mpi)");
}

}  // namespace dd
