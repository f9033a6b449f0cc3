// make_backend(): the factory over the backends compiled into this build (DREAMDDP_HAVE_* from dd_backends), and
// make_key_store(), the elastic key store of a rendezvous URL.
#include "backends/backend.h"
#include "backends/key_store.h"
#include "base/error.h"

#ifdef DREAMDDP_HAVE_GLOO
#include "backends/gloo/gloo_backend.h"
#endif
#ifdef DREAMDDP_HAVE_MPI
#include "backends/mpi/mpi_backend.h"
#endif
#ifdef DREAMDDP_HAVE_NCCL
#include "backends/nccl/nccl_backend.h"
#endif

namespace dd {

namespace {
constexpr const char* kBackendNames[] = {"gloo", "mpi", "nccl"};  // BackendKind's order
}  // namespace

const char* name(BackendKind k) { return kBackendNames[int(k)]; }

BackendKind parse_backend_kind(const std::string& s, const std::string& what) {
  for (int i = 0; i < 3; ++i)
    if (s == kBackendNames[i]) return BackendKind(i);
  throw UsageError(what + " '" + s + "' (expected gloo, mpi or nccl)");
}

std::unique_ptr<Backend> make_backend(const BackendOptions& opts) {
  switch (opts.kind) {
  case BackendKind::Gloo:
#ifdef DREAMDDP_HAVE_GLOO
    return make_gloo_backend(opts);
#else
    throw UsageError("backend 'gloo' is not compiled into this build (libgloo-dev was not found)");
#endif
  case BackendKind::Mpi:
#ifdef DREAMDDP_HAVE_MPI
    return make_mpi_backend(opts);
#else
    throw UsageError("backend 'mpi' is not compiled into this build (Open MPI was not found)");
#endif
  case BackendKind::Nccl:
#ifdef DREAMDDP_HAVE_NCCL
    return make_nccl_backend(opts);
#else
    throw UsageError("backend 'nccl' is not compiled into this build (CUDA + NCCL were not found)");
#endif
  }
  throw UsageError("unknown backend " + std::to_string(int(opts.kind)));
}

std::unique_ptr<KeyStore> make_key_store(const std::string& url, const std::string& name) {
  if (url.rfind("file:///", 0) == 0) return make_file_key_store(url.substr(7) + "/" + name);
  if (url.rfind("redis://", 0) == 0) {
#ifdef DREAMDDP_HAVE_GLOO
    return make_redis_key_store(url, name);
#else
    throw UsageError("rendezvous '" + url + "': Redis needs the gloo backend in this build; use file:///dir");
#endif
  }
  throw UsageError("rendezvous '" + url + "': expected file:///abs/path or redis://host:port[/JOB]");
}

}  // namespace dd
