// Gloo (TCP) backend: factory functions. Gloo types appear only as forward declarations here.
#pragma once
#include <memory>
#include <string>

#include "backends/backend.h"

namespace gloo::rendezvous {
class Store;
}

namespace dd {

// Creates the Gloo backend of `rank` in a group of `world` over an existing rendezvous store. Tests pass a
// shared gloo::rendezvous::HashStore to run ranks as threads. opts.prefix namespaces the keys (unique per job).
std::unique_ptr<Backend> make_gloo_backend(int rank, int world, std::shared_ptr<gloo::rendezvous::Store> store,
                                           const BackendOptions& opts);

// Store for a rendezvous URL: file:///dir (FileStore, directory created), redis://host:port (RedisStore),
// or "" with world == 1 (in-process HashStore). Throws dd::UsageError for anything else.
std::shared_ptr<gloo::rendezvous::Store> make_gloo_store(const std::string& url, int world);

// Uses opts.kind/rank/world/rendezvous: make_gloo_store + make_gloo_backend.
std::unique_ptr<Backend> make_gloo_backend(const BackendOptions& opts);

}  // namespace dd
