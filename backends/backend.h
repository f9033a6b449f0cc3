// The one communication interface the sync engine uses; Gloo (TCP), MPI and NCCL implement it.
// Operations are asynchronous and executed strictly in submission order on the backend's communication
// thread (CPU) or stream (NCCL): launch order is the caller's contract (docs/design.md, consistency rule).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dd {

enum class ReduceOp { Sum, Avg };

// Handle of one asynchronous operation. wait() rethrows the operation's error: dd::PeerLost (exit 3) when
// a peer is lost or the per-op timeout expires, naming the rank where known.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;  // true when finished (successfully or not); wait() then returns or throws at once
  // dd::now_s() when the operation finished on the communication thread/stream (0 if unknown or not yet).
  virtual double end_time() const { return 0; }
};
using WorkPtr = std::shared_ptr<Work>;

// Waits for every work, ignoring their errors (never throws): what an owner of the buffers the works write into
// calls before it frees them, e.g. while an exception unwinds past a step with collectives in flight.
inline void wait_all_quietly(const std::vector<WorkPtr>& works) noexcept {
  for (const auto& w : works) {
    try {
      if (w) w->wait();
    } catch (...) {
    }
  }
}

// Blocking byte collectives on a group's data channel, handed to a Backend::run_bytes operation on the
// communication thread (compressed layer sync builds its quantized reduce-scatter + all-gather from them).
class ByteChannel {
 public:
  virtual ~ByteChannel() = default;
  // `in`: size() blocks of n bytes, block r for rank r; `out`: size() blocks of n bytes, block r from rank r.
  // Both null: sizes only, on a channel of a backend that moves no data (a simulation times the transfers).
  virtual void alltoall(const void* in, void* out, size_t n) = 0;
  // `in`: n bytes; `out`: size() blocks of n bytes, block r from rank r (both null: sizes only, as above).
  virtual void allgather(const void* in, void* out, size_t n) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "gloo", "mpi", "nccl": for messages and files, not for decisions
  // What the backend can do, asked where a caller decides by it. Device memory: the float collectives take device
  // pointers (nccl) rather than host ones. Byte channel: run_bytes works (gloo, mpi, the simulator's; nccl, which
  // keeps the refusing default run_bytes, says false).
  virtual bool collectives_on_device_memory() const { return false; }
  virtual bool has_byte_channel() const { return true; }

  // In-place allreduce of n floats (host memory for gloo/mpi, device memory for nccl).
  virtual WorkPtr allreduce(float* data, size_t n, ReduceOp op) = 0;
  // In-place broadcast of n floats from `root` (a rank of this group).
  virtual WorkPtr broadcast(float* data, size_t n, int root) = 0;
  // Asynchronous, in submission order with the float collectives: runs fn on the communication thread with this
  // group's byte channel (host memory); an exception from fn fails the returned Work. `what` and `bytes` name the
  // operation in errors. Backends without a host byte channel (nccl) refuse with dd::UsageError.
  virtual WorkPtr run_bytes(std::function<void(ByteChannel&)> fn, const char* what, size_t bytes);
  // Blocking: every rank contributes a small byte blob, every rank receives all of them in rank order.
  virtual std::vector<std::string> allgather(const std::string& blob) = 0;
  // Blocking barrier (honours the timeout).
  virtual void barrier() = 0;
  // Collective over this group: every rank calls it; ranks with the same color form a new group, ordered by
  // their rank here. The new group has its own communication thread/stream and context.
  virtual std::unique_ptr<Backend> split(int color) = 0;
  // Per-operation timeout in seconds.
  virtual void set_timeout(double seconds) = 0;
  virtual double timeout() const = 0;
  // Fails this rank's pending and later operations with group rank `rank` at once, as a broken connection would (a
  // liveness verdict: the peer is silent while its sockets stay open). Any thread. Default: nothing, the timeout
  // still applies.
  virtual void abort_peer(int /*rank*/, const std::string& /*why*/) {}
};

// Where this process sits: from RANK/WORLD_SIZE/LOCAL_RANK (torchrun), OMPI_COMM_WORLD_* (mpirun),
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; none of them means a single process (rank 0 of 1).
struct RankInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string source = "none";  // "torchrun", "mpirun", "slurm", "none"
};
RankInfo discover_rank();
// The tasks Slurm puts on node NODE (SLURM_NODEID) from a SLURM_STEP_TASKS_PER_NODE list such as "2(x3),1";
// -1 if the list is malformed or shorter.
int slurm_tasks_on_node(const std::string& spec, int node);

// The launcher's job id (DREAMDDP_JOB, Slurm job.step, Open MPI / PMIx job, torchrun's --rdzv-id), "" if none.
std::string launcher_job_id();
// The rendezvous of a job: `flag` (--rendezvous), else $DREAMDDP_RENDEZVOUS, else a file store in
// FALLBACK_DIR/.rendezvous[/JOB] (JOB = launcher_job_id(), so rerunning into the same directory never meets an
// earlier job's keys), else "" (no fallback directory: the caller decides).
std::string resolve_rendezvous(const std::string& flag, const std::string& fallback_dir);
// Throws dd::UsageError unless `url` is "" or names a scheme a store can be made from (file:///abs/path,
// redis://host[:port][/JOB]). A single process never opens its store, so this is how it still refuses a typo.
void check_rendezvous_scheme(const std::string& url);

// Which backend: parsed once where a run is configured, compared as a value from there on.
enum class BackendKind { Gloo, Mpi, Nccl };
const char* name(BackendKind k);  // "gloo", "mpi", "nccl", as the CLI and the results files spell it
// Throws dd::UsageError "WHAT 'S' (expected gloo, mpi or nccl)".
BackendKind parse_backend_kind(const std::string& s, const std::string& what = "unknown backend");

struct BackendOptions {
  BackendKind kind = BackendKind::Gloo;
  int rank = 0;
  int world = 1;
  std::string rendezvous;      // file:///path | redis://host:port | "" (caller supplies a default)
  std::string iface;           // network interface to bind (also GLOO_SOCKET_IFNAME)
  double timeout_s = 60;
  std::string prefix = "dd";   // store key prefix (unique per job / group)
  // After a failed collective, how long to wait for the other ranks' reports through the store, so that the error
  // names the lost ranks (gloo): -1 min(timeout, 3 s); 0 none (the error does not name them; `train --on-peer-loss
  // shrink` identifies the survivors itself and wants its peers to fail at once).
  double postmortem_s = -1;
  // How long connecting to the group may take (gloo): -1 max(timeout, 30 s), the start of a job whose ranks start
  // at different times; a world rebuilt by `--on-peer-loss shrink`, whose members meet at once, sets less.
  double connect_s = -1;
};

// Throws dd::UsageError for an unknown or not-compiled-in backend or a malformed rendezvous.
std::unique_ptr<Backend> make_backend(const BackendOptions& opts);

}  // namespace dd
