// Checkpoints for exact resume: one file per rank (OUT/checkpoint.rank<R>.bin), written atomically (temporary
// file, then rename), CRC-checked on read. Holds parameters, BatchNorm buffers, optimizer state, the sync
// engine's and policy's state, the sensitivity probe's open probe, and the step; the data order and LR schedule
// are functions of the step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/train/config.h"

namespace dd {
class Backend;
}
namespace dd::sync {
class EngineState;
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

// Where a resumed rank's state comes from (docs/elastic.md). Decided from the files alone, before the
// rendezvous, so that every rank reaches the same verdict (they all read rank 0's header).
struct ResumePlan {
  int from_world = 0;  // the world size that wrote the checkpoint
  int from_rank = 0;   // whose state this rank loads: its own on the same world size, rank 0's on another
  std::string path;    // another world size: rank 0's file of the chosen step; same world: this rank's newest
  int64_t step = -1;   // the step of `path`
  bool same_world = true;
};

// Plans --resume DIR for this run (cfg.world ranks). Same world size: this rank's own intact file (the common step
// is agreed later, choose_checkpoint). Another world size: the newest step every old rank holds (rank 0's newest
// when the other ranks' files are not visible here), rank 0's state for every new rank. Throws dd::UsageError
// with one line naming both world sizes when the checkpoint cannot be resumed on this world size (another model
// or configuration, a policy whose state does not map, --sensitivity).
ResumePlan plan_resume(const std::string& dir, const TrainConfig& cfg);

// Why a policy's state cannot be carried to another world size ("" when it can): state per old rank or laid out
// over the old ranks (--resume on another world size, and --on-peer-loss shrink).
std::string unmappable_policy_state(const sync::PolicySpec& spec);
// Why a checkpoint written after `step`, the last of a run of `steps`, is not resumed: the run it belongs to
// trained every step (resuming would train none, skip the end-of-run average and overwrite its summary).
std::string finished_run(int64_t step, int64_t steps);

// The fields a checkpoint must agree on with the run that loads it, as "key=value" lines.
std::string checkpoint_fingerprint(const TrainConfig& cfg, const models::Model& m);

// Writes the state after completed step `step` (with the sensitivity probe's open probe when `probe` is given)
// and the global data position the next step starts at (-1: (step + 1) * world * batch, the plain order).
void write_checkpoint(const std::string& path, const TrainConfig& cfg, int64_t step, models::Model& m,
                      optim::Optimizer& opt, sync::EngineState* engine, const SensitivityProbe* probe = nullptr,
                      int64_t data_position = -1);

// The last completed step recorded in a checkpoint (validates magic and CRC). Throws dd::UsageError.
int64_t checkpoint_step(const std::string& path);

// A checkpoint read and checked in full (magic, CRC, this run's configuration and model, its steps, every size),
// held on the host until it is applied: what a resume checks before anything is written. The sensitivity probe's
// state (when `probe` is given) is loaded here; the engine's is checked when applied, once the engine exists.
struct LoadedCheckpoint {
  std::string path;
  int64_t step = -1;  // the last completed step
  std::vector<float> params, buffers, opt_state;
  std::vector<int64_t> layer_steps;
  std::string engine;          // the engine's state ("" from a single process)
  int64_t data_position = 0;   // the global data position the next step starts at
};
LoadedCheckpoint parse_checkpoint(const std::string& path, const TrainConfig& cfg, const models::Model& m,
                                  const optim::Optimizer& opt, SensitivityProbe* probe = nullptr, int from_world = 0,
                                  int from_rank = -1);
// Puts a parsed checkpoint into the model and optimizer (on their device) and the engine (when given).
void apply_checkpoint(const LoadedCheckpoint& c, models::Model& m, optim::Optimizer& opt, sync::EngineState* engine);

// parse_checkpoint then apply_checkpoint: loads a checkpoint into model, optimizer, engine and (when given) the
// sensitivity probe; returns the last
// completed step. Throws dd::UsageError for a missing, truncated or corrupt file, or one from another model or
// configuration (naming the fields).
// `from_world`/`from_rank` (> 0 / >= 0): the file was written by that rank of a run of that world size
// (plan_resume); `data_position` (when given) receives the global data position the next step starts at.
int64_t read_checkpoint(const std::string& path, const TrainConfig& cfg, models::Model& m, optim::Optimizer& opt,
                        sync::EngineState* engine, SensitivityProbe* probe = nullptr, int from_world = 0,
                        int from_rank = -1, int64_t* data_position = nullptr);

}  // namespace dd::train
