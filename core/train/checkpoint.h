// Checkpoints for exact resume: one file per rank (OUT/checkpoint.rank<R>.bin), written atomically (temporary
// file, then rename), CRC-checked on read. Holds parameters, BatchNorm buffers, optimizer state, the sync
// engine's and policy's state, the sensitivity probe's open probe, and the step; the data order and LR schedule
// are functions of the step.
#pragma once
#include <cstdint>
#include <string>

#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/train/config.h"

namespace dd {
class Backend;
}
namespace dd::sync {
class SyncEngine;
}

namespace dd::train {

class SensitivityProbe;

// This rank's newest checkpoint, and the one before it (kept so that a kill between two ranks' writes still
// leaves a step that every rank has).
std::string checkpoint_path(const std::string& dir, int rank);
std::string previous_checkpoint_path(const std::string& dir, int rank);

// The file to resume from: the newest step that every rank holds (agreed through `b` when given; collective).
// Throws dd::UsageError when there is none.
std::string choose_checkpoint(const std::string& dir, int rank, Backend* b);

// The fields a checkpoint must agree on with the run that loads it, as "key=value" lines.
std::string checkpoint_fingerprint(const TrainConfig& cfg, const models::Model& m);

// Writes the state after completed step `step` (with the sensitivity probe's open probe when `probe` is given).
void write_checkpoint(const std::string& path, const TrainConfig& cfg, int64_t step, models::Model& m,
                      optim::Optimizer& opt, sync::SyncEngine* engine, const SensitivityProbe* probe = nullptr);

// The last completed step recorded in a checkpoint (validates magic and CRC). Throws dd::UsageError.
int64_t checkpoint_step(const std::string& path);

// Loads a checkpoint into model, optimizer, engine and (when given) the sensitivity probe; returns the last
// completed step. Throws dd::UsageError for a missing, truncated or corrupt file, or one from another model or
// configuration (naming the fields).
int64_t read_checkpoint(const std::string& path, const TrainConfig& cfg, models::Model& m, optim::Optimizer& opt,
                        sync::SyncEngine* engine, SensitivityProbe* probe = nullptr);

}  // namespace dd::train
