// Exact data-parallel sharding (docs/cli.md "Data sets"): which samples each rank trains on at each step.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace dd::data {

// The data order is one endless sequence of positions p = 0, 1, 2, ...; position p is sample
// perm_e[p mod size] with epoch e = p / size and perm_e = permutation(size, seed, e) (shuffle.h).
// The global batch of step t is positions [t*N*b, (t+1)*N*b), so it may straddle an epoch boundary, and rank r
// takes the r-th contiguous slice of b. Hence N ranks with batch b see exactly the samples that one process
// with batch N*b sees. Stateless in the step: resuming at step t needs only t.
// indices() may be called from several threads (the permutation cache is locked).
// Fault injection for the exactness tests: with DREAMDDP_FAULT_SHARDS=rank0 in the environment every rank reads
// rank 0's slice (the classic sharding bug: the rank offset forgotten), so a test can show that it catches it.
// (Permuting whole slices among ranks cannot be caught by any DDP test: the average over ranks is the same.)
class Sharder {
 public:
  Sharder(int64_t dataset_size, uint64_t seed, int world, int rank, int64_t batch);
  ~Sharder();
  Sharder(Sharder&&) noexcept;
  Sharder& operator=(Sharder&&) noexcept;

  // Resuming on another world size (docs/elastic.md): step `step` and later continue the data order at global
  // position `position` (the samples the earlier world consumed), N*b positions per step from there. Without it
  // the origin is (0, 0): step t starts at t*N*b.
  void continue_at(int64_t step, int64_t position);
  // The first global position of step `step` (>= the origin step); position_of(s + 1) is the sample count
  // consumed after step s.
  int64_t position_of(int64_t step) const;

  // This rank's b sample indices of step `step` (>= 0).
  void indices(int64_t step, int64_t* out) const;
  std::vector<int64_t> batch(int64_t step) const;
  // All N*b indices of the global batch, rank slices in rank order.
  void global_indices(int64_t step, int64_t* out) const;
  // Sample at global position p.
  int64_t sample_at(int64_t position) const;

  // Epoch (possibly fractional) reached after `steps` steps: steps*N*b / size.
  double epochs_after(int64_t steps) const;

  int64_t dataset_size() const { return size_; }
  int world() const { return world_; }
  int rank() const { return rank_; }
  int64_t local_batch() const { return batch_; }
  int64_t global_batch() const { return batch_ * world_; }

 private:
  struct Cache;
  void copy_positions(int64_t first, int64_t n, int64_t* out) const;

  int64_t size_;
  uint64_t seed_;
  int world_;
  int rank_;
  int64_t batch_;
  bool fault_rank0_ = false;
  int64_t origin_step_ = 0, origin_position_ = 0;
  std::unique_ptr<Cache> cache_;
};

}  // namespace dd::data
