// The control all-reduce of the consistency rule (docs/design.md): after each update every rank casts one small vector —
// its policy's votes, then [control-file switch request, anomaly flag] when those are on, then one float per layer
// while compress=auto measures — summed over the ranks asynchronously and applied by every rank at the same later
// step (ControlQueue::due), so all ranks decide from the same numbers without stalling compute.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/common/bytes.h"
#include "core/sync/types/data_path.h"
#include "core/tensor/buffer.h"

namespace dd::sync {

// Where each part of a control vector sits (fixed per policy generation).
struct ControlLayout {
  size_t policy_votes = 0;
  bool switch_flag = false, anomaly_flag = false;
  size_t auto_votes = 0;
  size_t size() const { return policy_votes + (switch_flag ? 1 : 0) + (anomaly_flag ? 1 : 0) + auto_votes; }
};

struct ControlVector {
  int64_t step = 0;
  uint64_t generation = 0;  // the policy it was cast under
  ControlLayout layout;
  std::unique_ptr<FloatBuffer> sums;
  WorkPtr work;
};

class ControlQueue {
 public:
  static constexpr int kMaxLag = 2;
  ~ControlQueue();  // waits for what is in flight (never throws)
  // Launches the sum over b's ranks of `votes` (layout.size() floats, copied).
  void cast(int64_t step, uint64_t generation, const ControlLayout& layout, const float* votes, DataPath& dp, Backend& b);
  // Oldest first, every vector cast at least `lag` steps before `step` (all of them when `all`), summed;
  // *waited_s += the time spent waiting for their all-reduces.
  std::vector<ControlVector> due(int64_t step, int lag, bool all, double* waited_s);
  // Checkpoints: the sums still to be applied, to apply at the same steps after a resume (waits for them).
  void save(ByteWriter& w);
  void load(ByteReader& r, uint64_t generation, const ControlLayout& layout);

 private:
  std::deque<ControlVector> q_;
};

}  // namespace dd::sync
