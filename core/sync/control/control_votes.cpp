// ControlQueue: the control all-reduces in flight or agreed, oldest first (control_votes.h).
#include "core/sync/control/control_votes.h"

#include <algorithm>

#include "base/clock.h"
#include "base/error.h"

namespace dd::sync {

ControlQueue::~ControlQueue() {
  try {
    for (auto& c : q_)
      if (c.work) c.work->wait();
  } catch (...) {
  }
}

void ControlQueue::cast(int64_t step, uint64_t generation, const ControlLayout& layout, const float* votes,
                        DataPath& dp, Backend& b) {
  ControlVector c;
  c.step = step;
  c.generation = generation;
  c.layout = layout;
  c.sums = std::make_unique<FloatBuffer>();
  c.sums->resize(layout.size());
  std::copy(votes, votes + layout.size(), c.sums->data());
  c.work = dp.allreduce_host(b, c.sums->data(), c.sums->size(), ReduceOp::Sum);
  q_.push_back(std::move(c));
}

std::vector<ControlVector> ControlQueue::due(int64_t step, int lag, bool all, double* waited_s) {
  std::vector<ControlVector> out;
  while (!q_.empty() && (all || q_.front().step <= step - lag)) {
    ControlVector c = std::move(q_.front());
    q_.pop_front();
    if (c.work) {
      const double t0 = now_s();
      c.work->wait();
      *waited_s += now_s() - t0;
      c.work.reset();
    }
    out.push_back(std::move(c));
  }
  return out;
}

void ControlQueue::save(ByteWriter& w) {
  for (auto& c : q_)
    if (c.work) c.work->wait(), c.work.reset();
  w.put<uint8_t>(uint8_t(q_.size()));
  for (auto& c : q_) {
    w.put<int64_t>(c.step);
    w.put_floats(c.sums->data(), c.sums->size());
  }
}

void ControlQueue::load(ByteReader& r, uint64_t generation, const ControlLayout& layout) {
  q_.clear();
  const int pending = r.get<uint8_t>();
  if (pending > kMaxLag) throw UsageError("checkpoint: engine state holds too many pending votes");
  for (int i = 0; i < pending; ++i) {
    ControlVector c;
    c.step = r.get<int64_t>();
    c.generation = generation;
    c.layout = layout;
    c.sums = std::make_unique<FloatBuffer>();
    c.sums->resize(layout.size());
    r.get_floats(c.sums->data(), c.sums->size());
    q_.push_back(std::move(c));
  }
}

}  // namespace dd::sync
