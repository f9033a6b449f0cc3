// Under `mpirun -n 2`: rank 1 stalls, rank 0 must get PeerLost within its 1 s timeout and then fail fast.
// Prints MPI-TIMEOUT-OK on success (the ctest checks the text: a failed MPI job's exit code is mpirun's).
#include <cstdio>
#include <string>
#include <thread>

#include "backends/mpi/mpi_backend.h"
#include "base/clock.h"
#include "base/error.h"

int main() {
  using namespace dd;
  BackendOptions o;
  o.kind = dd::BackendKind::Mpi;
  o.timeout_s = 1;
  auto info = discover_rank();
  o.rank = info.rank;
  o.world = info.world;
  auto be = make_mpi_backend(o);
  if (be->rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return 0;
  }
  std::vector<float> v(1000, 1.0f);
  double t0 = now_s();
  try {
    be->allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
  } catch (const PeerLost& e) {
    double dt = now_s() - t0;
    double t1 = now_s();
    bool fast = false;
    try {
      be->barrier();
    } catch (const PeerLost&) {
      fast = now_s() - t1 < 0.5;
    }
    std::printf("rank 0: PeerLost after %.2f s (%s); later op failed fast: %d\n", dt, e.what(), fast);
    if (dt >= 0.9 && dt < 3.0 && fast) std::printf("MPI-TIMEOUT-OK\n");
    std::fflush(stdout);
    return 3;
  }
  std::printf("rank 0: no error although rank 1 never joined\n");
  return 1;
}
