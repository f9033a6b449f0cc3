// Sharder: positions -> samples through per-epoch permutations, with the last two permutations cached.
#include "core/data/sharder.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "base/error.h"
#include "core/data/shuffle.h"

namespace dd::data {

// Two slots: a global batch that straddles epochs e and e+1 needs both, and steps only move forward.
struct Sharder::Cache {
  std::mutex mu;
  int64_t epoch[2] = {-1, -1};
  std::vector<int64_t> perm[2];
  int next = 0;
};

Sharder::Sharder(int64_t dataset_size, uint64_t seed, int world, int rank, int64_t batch)
    : size_(dataset_size), seed_(seed), world_(world), rank_(rank), batch_(batch),
      cache_(std::make_unique<Cache>()) {
  if (dataset_size < 1) throw dd::UsageError("cannot shard an empty dataset");
  if (world < 1) throw dd::UsageError("world size must be at least 1, got " + std::to_string(world));
  if (rank < 0 || rank >= world)
    throw dd::UsageError("rank " + std::to_string(rank) + " is outside world size " + std::to_string(world));
  if (batch < 1) throw dd::UsageError("--batch must be at least 1, got " + std::to_string(batch));
  const char* fault = std::getenv("DREAMDDP_FAULT_SHARDS");
  fault_rank0_ = fault && std::string(fault) == "rank0";
}

Sharder::~Sharder() = default;
Sharder::Sharder(Sharder&&) noexcept = default;
Sharder& Sharder::operator=(Sharder&&) noexcept = default;

void Sharder::copy_positions(int64_t first, int64_t n, int64_t* out) const {
  DD_CHECK(first >= 0, "negative data position " + std::to_string(first));
  std::lock_guard<std::mutex> lock(cache_->mu);
  int64_t p = first;
  const int64_t end = first + n;
  while (p < end) {
    const int64_t e = p / size_;
    const int64_t off = p % size_;
    const int64_t run = std::min(end - p, size_ - off);
    int slot = cache_->epoch[0] == e ? 0 : cache_->epoch[1] == e ? 1 : -1;
    if (slot < 0) {
      slot = cache_->next;
      cache_->next ^= 1;
      cache_->perm[slot].resize(size_t(size_));
      permutation(size_, seed_, uint64_t(e), cache_->perm[slot].data());
      cache_->epoch[slot] = e;
    }
    std::copy_n(cache_->perm[slot].data() + off, run, out + (p - first));
    p += run;
  }
}

void Sharder::continue_at(int64_t step, int64_t position) {
  DD_CHECK(step >= 0 && position >= 0, "negative data origin");
  origin_step_ = step;
  origin_position_ = position;
}

int64_t Sharder::position_of(int64_t step) const {
  return origin_position_ + (step - origin_step_) * global_batch();
}

void Sharder::indices(int64_t step, int64_t* out) const {
  copy_positions(position_of(step) + (fault_rank0_ ? 0 : int64_t(rank_) * batch_), batch_, out);
}

std::vector<int64_t> Sharder::batch(int64_t step) const {
  std::vector<int64_t> out(static_cast<size_t>(batch_));
  indices(step, out.data());
  return out;
}

void Sharder::global_indices(int64_t step, int64_t* out) const {
  copy_positions(position_of(step), global_batch(), out);
}

int64_t Sharder::sample_at(int64_t position) const {
  int64_t s;
  copy_positions(position, 1, &s);
  return s;
}

double Sharder::epochs_after(int64_t steps) const {
  return double(steps) * double(global_batch()) / double(size_);
}

}  // namespace dd::data
