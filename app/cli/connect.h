// Connects this rank to its peers (gloo/mpi/nccl) and checks that every rank runs the same configuration.
#pragma once
#include <memory>

#include "backends/backend.h"
#include "core/train/config.h"

namespace dd::cli {

// The backend options of this rank (kind, rank, world, the resolved rendezvous, interface, timeout). Throws
// dd::UsageError when several gloo ranks have no rendezvous.
BackendOptions backend_options(const train::TrainConfig& cfg);

// The fields every rank must agree on, as "key=value" lines (the start-up handshake compares them; a live world
// compares a joiner's).
std::string config_fingerprint(const train::TrainConfig& cfg);

// Null for a single process. Throws dd::UsageError when ranks disagree (naming the fields), dd::PeerLost when
// peers do not show up within the timeout.
std::unique_ptr<Backend> connect(const train::TrainConfig& cfg);

}  // namespace dd::cli
