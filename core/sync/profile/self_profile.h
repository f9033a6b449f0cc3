// SelfProfile: the engine's own profile of dreamddp's first (lock-step) steps — per-layer backward times from the
// hook's ready times, the all-reduce time of every layer from a latency-bandwidth fit on this backend and network,
// one profile agreed by every rank (each must compute the same schedule). `dreamddp profile` measures the same two
// things offline (core/sync/profile/profiler.h); both take backward times from ready times with backward_times().
#pragma once
#include <cstdint>
#include <vector>

#include "core/common/bytes.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/profile/comm_fit.h"
#include "core/sync/types/data_path.h"
#include "core/sync/types/layer_times.h"

namespace dd::sync {

// Per-layer backward time of one backward pass: layer l's ready time minus the next layer's (the last layer's
// minus the start of the backward), forward layer order.
std::vector<double> backward_times(const std::vector<double>& ready, double t_bwd);

class SelfProfile {
 public:
  // bucket_cap: the engine's largest fused bucket in bytes, the largest size its comm model is timed at.
  explicit SelfProfile(int layers, int64_t bucket_cap = int64_t(25) << 20)
      : sum_(size_t(layers), 0.0), bucket_cap_(bucket_cap) {}
  // One profiling step's ready times (step 0 is warm-up and is skipped).
  void add(int64_t step, const std::vector<double>& ready, double t_bwd);
  // Collective: the agreed profile (rank-averaged, then rank 0's floats everywhere; backward times paced to the
  // slowest rank's mean backward), with the comm model of `layers` measured on b through dp, and the contention
  // measured here unless `given`.
  LayerTimes finish(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                    const Contention* given = nullptr);

  // One all-reduce of an ordinary step (Profiled::observe_steps): its bytes and its seconds on the communication
  // thread.
  void add_comm(int64_t bytes, double seconds);
  // Collective: the agreed profile of ordinary steps: backward times as finish() does, each layer's all-reduce from
  // fit_comm over the recorded all-reduces (0 where none was recorded), no probe; the contention `given`, else none
  // (the records carry it already: they overlapped). Three small collectives, nothing sized by the model.
  LayerTimes finish_observed(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                             const Contention* given = nullptr);

  void save(ByteWriter& w) const;
  void load(ByteReader& r);
  void save_comm(ByteWriter& w) const;
  void load_comm(ByteReader& r);

 private:
  LayerTimes mean_backward() const;
  // Collective: t agreed over the ranks, backward times paced to the slowest rank.
  static void agree(DataPath& dp, Backend& b, LayerTimes& t);

  std::vector<double> sum_;
  std::vector<int64_t> comm_bytes_;
  std::vector<double> comm_s_;
  int32_t n_ = 0;
  int64_t bucket_cap_;
};

// Collective: `v` reduced with `op` over the ranks, then rank 0's floats everywhere (bitwise one answer on every
// rank, whatever the backend's reduction order). `v` is host memory on either data path.
void agree_floats(DataPath& dp, Backend& b, std::vector<float>& v, ReduceOp op);

// Collective: one profile for every rank (each must compute the same schedule) — the rank average of `bp`,
// `comm` and `contention` (when given), then rank 0's floats everywhere. Used by the engine's self-profile and by
// `dreamddp profile`.
void agree_profile(DataPath& dp, Backend& b, std::vector<double>& bp, std::vector<double>& comm,
                   Contention* contention = nullptr);

// Collective: what overlapped communication and compute cost each other on this rank (contention.h), ranks in
// step, median of 3 rounds: `compute` from a fixed GEMM loop (~20 ms, the rank's compute threads) timed alone and
// while an all-reduce that outlasts it runs on the communication thread; `comm` from an all-reduce of half that
// length timed alone and while the GEMM loop runs. Both near 0 where ranks do not share cores with each other's
// communication threads and network stacks; none on a device data path (compute does not run on the host's
// cores) and for one rank.
Contention measure_contention(DataPath& dp, Backend& b);

// Collective: the comm model evaluated at every layer's bytes: all-reduces timed at the model's own sizes
// (comm_probe_sizes with `bucket_cap`, the engine's largest fused bucket; median of 3 after one warm-up) and fitted
// with fit_comm, which `fit` receives when given. Every rank times the same sizes.
std::vector<double> measure_comm_model(DataPath& dp, Backend& b, const std::vector<LayerMeta>& layers,
                                       int64_t bucket_cap, CommFit* fit = nullptr);

}  // namespace dd::sync
