// discover_rank(): rank/world from torchrun, mpirun or Slurm environment variables (docs/cli.md).
#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "base/error.h"

namespace dd {
namespace {

// Returns -1 when unset; throws UsageError for a set but malformed value so a typo is never silently rank 0.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1000000)
    throw UsageError(std::string("environment variable ") + name + "='" + v + "' is not a non-negative integer");
  return static_cast<int>(x);
}

bool fill(RankInfo& info, const char* rank, const char* world, const char* local, const char* source) {
  int r = env_int(rank), w = env_int(world);
  if (r < 0 && w < 0) return false;
  if (r < 0 || w < 0)
    throw UsageError(std::string("only one of ") + rank + " and " + world + " is set; set both or neither");
  if (w < 1 || r >= w)
    throw UsageError(std::string(rank) + "=" + std::to_string(r) + " is not below " + world + "=" +
                     std::to_string(w));
  int l = env_int(local);
  info.rank = r;
  info.world = w;
  info.local_rank = l < 0 ? r : l;
  info.source = source;
  return true;
}

}  // namespace

RankInfo discover_rank() {
  RankInfo info;
  // torchrun first (our own launcher sets these), then mpirun, then Slurm (srun also runs under mpirun-less jobs).
  if (fill(info, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun")) return info;
  if (fill(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"))
    return info;
  if (fill(info, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm")) return info;
  return info;
}

}  // namespace dd
