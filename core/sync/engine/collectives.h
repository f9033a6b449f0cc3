// Collectives: every collective the sync engine issues goes through here — fingerprinted across ranks with
// --check-collectives (a mismatch fails loudly instead of hanging), numbered, and counted in the step's stats (bytes
// this rank contributes, collectives launched).
#pragma once
#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "core/sync/engine/in_place_undo.h"
#include "core/sync/engine/sync_engine.h"
#include "core/sync/policy/merge_spec.h"
#include "core/sync/types/data_path.h"

namespace dd::sync {

class Collectives {
 public:
  // undo (optional, --on-peer-loss shrink): in-place averages on the training state keep what they overwrite there.
  Collectives(DataPath& dp, Backend& world, bool check, std::shared_ptr<InPlaceUndo> undo = nullptr)
      : dp_(dp), world_(world), check_(check), undo_(std::move(undo)) {}
  void set_step(int64_t step) { step_ = step; }
  DataPath& data_path() { return dp_; }
  StepCommStats& stats() { return stats_; }
  const StepCommStats& stats() const { return stats_; }
  // Throws std::runtime_error naming both sides when the ranks of `world` are about to issue different collectives
  // (only with --check-collectives); numbers the collective either way.
  void fingerprint(const char* what, int64_t n);
  // In-place average of n floats of an arena over g; `ready_layer` as DataPath::allreduce (>= 0 from the hook).
  WorkPtr average(Backend& g, float* p, int64_t n, const char* what, int ready_layer = -1);
  // The compressed average of n floats in place (compressed_average.h) with residuals e1, e2, or with
  // c == Codec::TopK the sparse average of `topk` (sparse_average.h, residual e1); adds the encoded bytes this rank
  // contributes to *bytes and to the stats.
  WorkPtr compressed(Backend& g, Codec c, float* buf, int64_t n, float* e1, float* e2, int64_t* bytes,
                     const TopK& topk = TopK());

 private:
  DataPath& dp_;
  Backend& world_;
  bool check_;
  std::shared_ptr<InPlaceUndo> undo_;
  int64_t step_ = 0, seq_ = 0;
  StepCommStats stats_;
};

}  // namespace dd::sync
