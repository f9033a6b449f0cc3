// core_share: machine ids from the kernel's boot id, gathered through a one-hot float sum.
#include "core/sync/profile/core_share.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/common/crc.h"
#include "core/sync/profile/self_profile.h"
#include "core/sync/types/data_path.h"

namespace dd::sync {

uint32_t machine_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  if (id.empty()) {  // no procfs: the host name, which namespaced hosts may change; better than nothing
    std::ifstream h("/proc/sys/kernel/hostname");
    std::getline(h, id);
  }
  return crc32_of(id.data(), id.size());
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

CoreShare core_share_of(const uint32_t* ids, const int* cores, int world, int threads) {
  std::map<uint32_t, std::pair<int, int>> machines;  // id -> (ranks, fewest cores any of them may use)
  for (int r = 0; r < world; ++r) {
    auto& m = machines.try_emplace(ids[r], 0, cores[r]).first->second;
    m.first += 1;
    m.second = std::min(m.second, cores[r]);
  }
  CoreShare s;
  for (const auto& [id, m] : machines) {
    const bool over = int64_t(m.first) * threads > m.second;
    // The answer names the most crowded machine: ranks per core, the oversubscribed one first.
    if (s.cores == 0 || double(m.first) / m.second > double(s.ranks) / s.cores) s.ranks = m.first, s.cores = m.second;
    s.oversubscribed = s.oversubscribed || over;
  }
  return s;
}

CoreShare core_share(Backend& b, int threads) {
  const int n = b.size(), me = b.rank();
  // Three exact floats per rank: the id's two 16-bit halves and the cores (each below 2^24).
  std::vector<float> v(size_t(3 * n), 0.0f);
  const uint32_t id = machine_id();
  v[size_t(3 * me)] = float(id >> 16);
  v[size_t(3 * me + 1)] = float(id & 0xffffu);
  v[size_t(3 * me + 2)] = float(std::min(usable_cores(), 1 << 20));
  HostDataPath host;
  agree_floats(host, b, v, ReduceOp::Sum);
  std::vector<uint32_t> ids(static_cast<size_t>(n));
  std::vector<int> cores(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ids[size_t(r)] = (uint32_t(v[size_t(3 * r)]) << 16) | uint32_t(v[size_t(3 * r + 1)]);
    cores[size_t(r)] = int(v[size_t(3 * r + 2)]);
  }
  return core_share_of(ids.data(), cores.data(), n, threads);
}

}  // namespace dd::sync
