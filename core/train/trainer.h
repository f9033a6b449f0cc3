// The training loop of one rank (DESIGN.md "One training step"): data shard, forward, backward with the sync
// hook, per-layer update, evaluation, progress line, telemetry and the run summary.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "core/train/config.h"

namespace dd {
class Backend;
}

namespace dd::train {

class Trainer {
 public:
  // `backend` may be null for a single process. The trainer does not own it.
  Trainer(const TrainConfig& cfg, Backend* backend);
  ~Trainer();
  // Runs the configured steps; returns summary.json's content (also written to --out by rank 0).
  nlohmann::json run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Fills defaults that depend on other fields (optimizer, lr, warm-up, threads) and validates ranges.
// Throws dd::UsageError naming the option.
void resolve_and_validate(TrainConfig& cfg);

}  // namespace dd::train
