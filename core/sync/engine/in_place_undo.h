// Recovery that costs nothing when nothing fails (docs/elastic.md "Shrink without restart"). An in-place
// collective on the training state (parameters, buffers, optimizer state) first keeps the values it is about to
// overwrite and forgets them once its wait() returns. A peer lost mid-collective can leave partial sums in that
// range; once the failed world's backend is gone (no thread writes any more), undo() puts every range whose
// collective did not complete back to its values before the launch. Everything else the failed step finished stays,
// so the state is never copied whole, step after step: Local SGD keeps one copy of the parameters per average,
// dreamddp the layers it averages in the step, ddp (which averages gradients) nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "core/ops/device.h"

namespace dd::sync {

class InPlaceUndo : public std::enable_shared_from_this<InPlaceUndo> {
 public:
  // The training state's arenas, in the memory of `d` (where their kept values are copied, and copied back): a
  // range inside one is kept; any other (gradients, copies) is not.
  void protect(const float* p, size_t n, ops::Device& d = ops::host_device());
  bool covers(const float* p, size_t n) const;
  // Launches an in-place collective on [p, p+n) with `start`, keeping the range's values first when it is covered.
  // The returned Work forgets them once its wait() returns.
  WorkPtr launch(float* p, size_t n, const std::function<WorkPtr()>& start);
  // Puts back the values of every kept range whose collective did not complete (newest first) and forgets them;
  // returns how many floats were put back (0: no collective on the state was in flight).
  size_t undo();
  size_t in_flight() const;     // ranges kept now
  int64_t kept_floats() const;  // floats copied since construction: what being ready for a loss cost

 private:
  struct Record {
    float* p = nullptr;
    size_t n = 0;
    ops::Device* dev = nullptr;
    ops::DeviceFloats old;
    uint64_t id = 0;
    bool live = false;
  };
  void forget(uint64_t id);
  mutable std::mutex mu_;
  struct Protected {
    const float* p;
    size_t n;
    ops::Device* dev;
  };
  ops::Device* device_of(const float* p, size_t n) const;  // null: not inside a protected arena (mu_ held)
  std::vector<Protected> arenas_;
  std::vector<Record> recs_;  // reused: a range launched again takes its record's buffer
  uint64_t next_id_ = 1;
  int64_t kept_ = 0;
};

}  // namespace dd::sync
