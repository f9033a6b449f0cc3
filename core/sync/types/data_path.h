// Where the sync engine's arenas live and how collectives run on them: host memory handed straight to the
// backend (CPU training, HostDataPath), or device memory (core/sync/cuda/device_path.h: NCCL on device
// pointers, or Gloo/MPI staged through pinned host buffers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/common/crc.h"
#include "core/ops/device.h"

namespace dd::sync {

// Base pointers of the arenas the engine synchronizes, in the CPU model's layout (core/models/model.h):
// layer l's parameters (and gradients) at param_offset, its buffers at buffer_offset; optimizer state is
// state_slots consecutive parameter-sized slots.
struct Arenas {
  float* params = nullptr;
  float* grads = nullptr;
  float* buffers = nullptr;
  float* opt_state = nullptr;
  int64_t num_params = 0, num_buffers = 0;
  int state_slots = 1;
  // The kernel table of the arenas' memory: what the engine computes on them (signals, merges, copies) runs there.
  ops::Device* device = &ops::host_device();
};

class DataPath {
 public:
  virtual ~DataPath() = default;
  // True when the arenas are host memory, which host code may read and write beside the engine (the codecs of
  // compress=, the contention probe's GEMMs); false for device memory.
  virtual bool host_memory() const = 0;
  // False where collectives move no data (a simulation times them): averages on copies then take no copies.
  virtual bool moves_data() const { return true; }
  // Asynchronous in-place collective on n floats of an arena. ready_layer >= 0: launched from the backward hook,
  // the data is final once that layer's backward has run; -1: final as of everything issued so far.
  // wait() on the result guarantees that whatever is issued afterwards (updates, copies) sees the result.
  virtual WorkPtr allreduce(Backend& g, float* p, size_t n, ReduceOp op, int ready_layer) = 0;
  virtual WorkPtr broadcast(Backend& g, float* p, size_t n, int root) = 0;
  // Asynchronous allreduce of a small HOST vector (control votes, the agreed profile); the result is in p
  // after wait().
  virtual WorkPtr allreduce_host(Backend& g, float* p, size_t n, ReduceOp op) = 0;
  // Runs `start` (host work that issues backend collectives, e.g. a compressed average on host memory) in the order
  // of this path's collectives; returns its Work. By default at once (the path issues its collectives at once).
  virtual WorkPtr run_host(const std::function<WorkPtr()>& start) { return start(); }
  // Rank `root`'s small HOST vector to every rank, waited for. By default an allreduce of (root's values, zeros
  // elsewhere), for backends that take only the device's memory; a path whose backend reads host memory
  // broadcasts.
  virtual void broadcast_host(Backend& g, float* p, size_t n, int root) {
    if (g.rank() != root) std::fill(p, p + n, 0.0f);
    allreduce_host(g, p, n, ReduceOp::Sum)->wait();
  }
  // Arena snapshots to host memory and back (the consensus copy of evaluation restores the training state).
  virtual void save(const float* p, size_t n, std::vector<float>& host) = 0;
  virtual void restore(float* p, size_t n, const std::vector<float>& host) = 0;
  // CRC-32 of n floats of an arena, continuing `c` (ranks compare them to skip averages of equal values). By
  // default through host snapshots of at most 4 MiB each.
  virtual uint32_t crc(const float* p, size_t n, uint32_t c = 0) {
    constexpr size_t kPiece = size_t(1) << 20;  // floats
    std::vector<float> host;
    for (size_t i = 0; i < n; i += kPiece) {
      const size_t k = std::min(kPiece, n - i);
      save(p + i, k, host);
      c = crc32_of(host.data(), 4 * k, c);
    }
    return c;
  }
  // An arena-space scratch buffer of at least n floats (timing collectives), valid until the next call.
  virtual float* scratch(size_t n) = 0;
  // From the hook in profiling steps: returns once layer l's backward has actually run (ready times are then
  // wall-clock truths, not the time the work was queued).
  virtual void wait_layer_ready(int l) = 0;
};

// Host arenas: every call goes straight to the backend, exactly as the engine always did.
class HostDataPath : public DataPath {
 public:
  bool host_memory() const override { return true; }
  WorkPtr allreduce(Backend& g, float* p, size_t n, ReduceOp op, int) override { return g.allreduce(p, n, op); }
  WorkPtr broadcast(Backend& g, float* p, size_t n, int root) override { return g.broadcast(p, n, root); }
  WorkPtr allreduce_host(Backend& g, float* p, size_t n, ReduceOp op) override { return g.allreduce(p, n, op); }
  void broadcast_host(Backend& g, float* p, size_t n, int root) override { g.broadcast(p, n, root)->wait(); }
  void save(const float* p, size_t n, std::vector<float>& host) override {
    host.resize(n);
    if (n) std::memcpy(host.data(), p, 4 * n);
  }
  uint32_t crc(const float* p, size_t n, uint32_t c) override { return crc32_of(p, 4 * n, c); }
  void restore(float* p, size_t n, const std::vector<float>& host) override {
    if (n) std::memcpy(p, host.data(), 4 * n);
  }
  float* scratch(size_t n) override {
    if (scratch_.size() < n) scratch_.resize(n);
    return scratch_.data();
  }
  void wait_layer_ready(int) override {}

 private:
  std::vector<float> scratch_;
};

}  // namespace dd::sync
