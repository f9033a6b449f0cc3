// Gloo (TCP) backend: factory functions. Gloo types appear only as forward declarations here.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "backends/backend.h"
#include "backends/key_store.h"

namespace gloo::rendezvous {
class Store;
}

namespace dd {

// Creates the Gloo backend of `rank` in a group of `world` over an existing rendezvous store. Tests pass a
// shared gloo::rendezvous::HashStore to run ranks as threads. opts.prefix namespaces the keys (unique per job).
std::unique_ptr<Backend> make_gloo_backend(int rank, int world, std::shared_ptr<gloo::rendezvous::Store> store,
                                           const BackendOptions& opts);

// Store for a rendezvous URL: file:///dir (FileStore, directory created), redis://host:port[/JOB] (RedisStore),
// or "" with world == 1 (in-process HashStore). Throws dd::UsageError for anything else.
std::shared_ptr<gloo::rendezvous::Store> make_gloo_store(const std::string& url, int world);

// The JOB of redis://host:port/JOB ("" otherwise): the key space of one job on a shared redis-server, because
// Redis keys outlive the job and a second job under the same keys is refused. make_gloo_backend(opts) prefixes
// opts.prefix with it.
std::string rendezvous_job(const std::string& url);

// host and port of redis://host:port[/JOB] (port 6379 by default), checked to accept a TCP connection. Throws
// dd::UsageError for a malformed URL or a server that cannot be reached.
std::pair<std::string, int> redis_address(const std::string& url);

// The elastic key store (backends/key_store.h) on the Redis server of redis://host:port[/JOB], keys under
// "<JOB>/<name>/". Throws dd::UsageError when this build has no Redis support (hiredis, through Gloo).
std::unique_ptr<KeyStore> make_redis_key_store(const std::string& url, const std::string& name);

// Uses opts.kind/rank/world/rendezvous: make_gloo_store + make_gloo_backend.
std::unique_ptr<Backend> make_gloo_backend(const BackendOptions& opts);

// For `dreamddp bench allreduce --compare-bare` only: a plain gloo::allreduce (sum, in place) over the backend's
// own data context, with the algorithm and timeout the backend would pick for that size, run on the calling
// thread with no queue, no error mapping and no averaging. This is the baseline our Gloo path is measured against.
// The caller must have no operation of `b` in flight (the data context is not thread-safe). Returns an empty
// function when `b` is not a Gloo backend.
using BareAllreduce = std::function<void(float* data, size_t n)>;
BareAllreduce gloo_bare_allreduce(Backend& b);

}  // namespace dd
