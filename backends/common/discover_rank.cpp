// discover_rank(): rank/world from torchrun, mpirun or Slurm environment variables (docs/cli.md).
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

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

// WORLD_SIZE without RANK under mpirun or srun (a WORLD_SIZE exported in a batch script): the launcher places the
// ranks, so agreeing is fine and disagreeing is refused with both numbers, never run as a world of the wrong size.
// True when the launcher's variables are to be used instead.
bool world_is_launchers() {
  const int w = env_int("WORLD_SIZE");
  if (w < 0 || env_int("RANK") >= 0) return false;
  for (auto [var, launcher] : {std::pair{"OMPI_COMM_WORLD_SIZE", "mpirun -n"}, {"SLURM_NTASKS", "srun -n"}}) {
    const int n = env_int(var);
    if (n < 0) continue;
    if (n != w)
      throw UsageError(std::string("WORLD_SIZE=") + std::to_string(w) + " disagrees with " + var + "=" +
                       std::to_string(n) + " (" + launcher + "); unset WORLD_SIZE or start " + std::to_string(w) +
                       " tasks");
    return true;  // the launcher's own variables say the same, with the rank
  }
  return false;
}

}  // namespace

int slurm_tasks_on_node(const std::string& spec, int node) {
  // "2(x3),1": counts in node order, "(xK)" repeats the count before it K times.
  size_t i = 0;
  int seen = 0;
  while (i < spec.size() && node >= 0) {
    size_t used = 0;
    int count = 0, times = 1;
    try {
      count = std::stoi(spec.substr(i), &used);
    } catch (const std::exception&) {
      return -1;
    }
    i += used;
    if (spec.compare(i, 2, "(x") == 0) {
      size_t used2 = 0;
      try {
        times = std::stoi(spec.substr(i + 2), &used2);
      } catch (const std::exception&) {
        return -1;
      }
      i += 2 + used2;
      if (i >= spec.size() || spec[i] != ')') return -1;
      ++i;
    }
    if (node < seen + times) return count;
    seen += times;
    if (i < spec.size() && spec[i] != ',') return -1;
    ++i;
  }
  return -1;
}

RankInfo discover_rank() {
  RankInfo info;
  // torchrun first (our own launcher sets these), then mpirun, then Slurm (srun also runs under mpirun-less jobs).
  if (!world_is_launchers() && fill(info, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun")) return info;
  if (fill(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"))
    return info;
  if (fill(info, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm")) return info;
  return info;
}

}  // namespace dd
