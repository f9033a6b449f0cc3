// Which ranks share one machine's cores: where the ranks on a machine run more threads than it has cores, a pass
// timed while every rank computes holds the others' share of the cores, which a run (whose ranks also wait on
// transfers) does not see in full. `dreamddp profile` then times the passes one rank at a time, and a simulation
// shares the cores among the ranks computing at once (`simulate --shared-cores`).
#pragma once
#include <cstdint>
#include <string>

namespace dd {
class Backend;
}

namespace dd::sync {

struct CoreShare {
  int cores = 0;        // the cores of the most loaded machine (this rank's own when none is oversubscribed)
  int ranks = 1;        // the ranks on that machine
  bool oversubscribed = false;  // some machine's ranks x threads exceed its cores
};

// The kernel's boot id (the same in every network namespace of one machine) as 32 bits, and the cores this
// process may run on.
uint32_t machine_id();
int usable_cores();

// Collective: every rank's machine id and cores, gathered; the same answer on every rank. `threads` is each rank's
// compute threads.
CoreShare core_share(Backend& b, int threads);

// Pure: the answer from every rank's (machine id, cores), in rank order.
CoreShare core_share_of(const uint32_t* ids, const int* cores, int world, int threads);

}  // namespace dd::sync
