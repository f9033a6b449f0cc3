// SimBackend: the Backend (backends/backend.h) of a simulated rank. The sync engine runs unchanged on it; every
// collective becomes a job on the group's per-rank FIFO, run by a SimGrid actor (the backend's communication thread)
// as ring transfers between ring neighbours over the simulated network. Data is never moved: a simulation times
// collectives, it does not compute their results (run_bytes hands its function a channel that copies the rank's
// own block into every slot) on the arenas; the small host vectors the ranks decide on (control votes, the agreed
// self-profile, a trial's times) are reduced for real. SimGrid types stay in sim_backend.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace simgrid::s4u {
class Host;
}

namespace dd::sim {

struct SimGroup;
struct RankIdle;  // rank_compute.cpp: what a rank's compute waits on while its collectives run

// A nominal host computes kRefSpeed flop/s; a profile second is kRefSpeed flops, so a host of speed s runs it in
// kRefSpeed / s seconds (platform files: 1Gf is nominal); --slow R=F multiplies rank R's compute by F.
constexpr double kRefSpeed = 1e9;

// What every simulated rank shares: the hosts, how collectives are simulated, counters.
struct SimNet {
  std::vector<simgrid::s4u::Host*> hosts;  // by world rank
  // --shared-cores: the one machine every rank computes on (null: each rank computes on its own host), and the
  // cores one rank takes while it computes.
  simgrid::s4u::Host* cpu = nullptr;
  int rank_threads = 1;
  std::string collectives = "auto";        // ring | fused | auto (ring up to 32 members, fused beyond)
  int64_t flows = 0;                        // point-to-point transfers simulated
  // Per world rank: bulk collectives (on the arenas, or a compressed average's byte channel) queued or running on
  // any of its channels; compute runs slower meanwhile, by the profile's contention. The small vectors ranks
  // decide on (a vote's few floats) wait on latency, not on the CPU, and do not count.
  std::vector<int> comm_busy;
  std::vector<std::shared_ptr<RankIdle>> idle;  // by world rank, made on first use (wait_comm_idle)
  // The profile's communication-side contention: a rank's transfers take 1 + comm_slowdown times longer for the
  // part of them that overlaps that rank's compute. Compute is tracked per world rank: seconds computed before
  // the current compute call, and when that call started (negative: not computing).
  double comm_slowdown = 0;
  std::vector<double> computed_s, computing_since;
  double computed_until(int rank, double t) const {
    const double since = computing_since[size_t(rank)];
    return computed_s[size_t(rank)] + (since >= 0 && t > since ? t - since : 0.0);
  }
  int next_group = 0;
  std::shared_ptr<SimGroup> world;  // SimBackend::make_world
  // The sizes-only arenas (and their scratch): collectives there move no data; on any other vector they do.
  const char* sizes_lo = nullptr;
  const char* sizes_hi = nullptr;
  bool moves(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return p && !(c >= sizes_lo && c < sizes_hi);
  }
};

// Blocks the calling actor (rank `rank`'s compute) until none of that rank's collectives is queued or running, or
// until simulated time `until`, whichever comes first.
void wait_comm_idle(SimNet& net, int rank, double until);

// Rank `rank`'s compute of `flops` on the shared machine (net.cpu), beside the other ranks computing there: while
// the rank's bulk collectives run it does k times that work, and what is left when they end at the plain rate.
void compute_on_shared_cores(SimNet& net, int rank, double flops, double k);

// Called by the communication actor that ended rank `rank`'s last bulk collective: its compute runs at the plain
// rate again (a slowed compute on shared cores is cancelled, what was left of it noted), and wait_comm_idle wakes.
void end_slowed_compute(SimNet& net, int rank);

class SimBackend : public Backend {
 public:
  // The world group of `net.hosts.size()` ranks: made once before the simulation runs (make_world), then taken
  // by each rank from its own actor (world).
  static void make_world(SimNet& net);
  static std::unique_ptr<SimBackend> world(SimNet& net, int rank);
  SimBackend(SimNet& net, std::shared_ptr<SimGroup> g, int pos);
  ~SimBackend() override;

  int rank() const override { return pos_; }
  int size() const override;
  std::string name() const override { return "simgrid"; }
  WorkPtr allreduce(float* data, size_t n, ReduceOp op) override;
  WorkPtr broadcast(float* data, size_t n, int root) override;
  WorkPtr run_bytes(std::function<void(ByteChannel&)> fn, const char* what, size_t bytes) override;
  std::vector<std::string> allgather(const std::string& blob) override;
  void barrier() override;
  std::unique_ptr<Backend> split(int color) override;
  void set_timeout(double) override {}
  double timeout() const override { return 0; }

 private:
  WorkPtr push(int kind, int64_t bytes, std::function<void(ByteChannel&)> fn, float* data = nullptr,
               ReduceOp op = ReduceOp::Sum, int root = 0);
  SimNet& net_;
  std::shared_ptr<SimGroup> g_;
  int pos_;
  int64_t splits_ = 0;
};

}  // namespace dd::sim
