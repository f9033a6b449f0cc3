// The trainer's state, shared by its files: trainer.cpp (the loop and its parts) and trainer_elastic.cpp (shrink
// and rejoin, docs/elastic.md). Private to core/train.
#pragma once
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/data/dataset.h"
#include "core/data/sharder.h"
#include "core/models/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/sync_session.h"
#include "core/train/device_state.h"
#include "core/train/elastic.h"
#include "core/train/liveness.h"
#include "core/train/progress.h"
#include "core/train/sensitivity.h"
#include "core/train/trainer.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

struct RunLoop;
struct StepResult;
struct ResumePlan;
struct LoadedCheckpoint;

// A rejoin's knobs (trainer_heal.cpp), read from the environment; a bad value is a UsageError.
// DREAMDDP_HEAL_CHUNK_BYTES: the largest message of the transfer (default 4 MiB). DREAMDDP_PAUSE_IN_HEAL: a joiner
// stops itself after that many messages (fault tests; 0: unset).
int64_t heal_chunk_bytes();
int64_t heal_pause_after();

struct Trainer::Impl {
  TrainConfig cfg;
  Backend* backend;
  // Where the rank computes; the model and optimizer are built there and are the one training state. Declared
  // first: the model's memory and the engine's data path belong to the device, so it goes last.
  std::unique_ptr<DeviceState> dev;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<optim::Optimizer> opt;
  optim::LrSchedule sched;
  data::Dataset train, test;
  std::unique_ptr<data::Sharder> sharder;
  data::Batch batch;
  std::unique_ptr<sync::SyncSession> engine;
  // The engine's agreed self-profile, kept across a change of world size (profile_carry.h): after a shrink the
  // survivors scale it instead of profiling again.
  std::shared_ptr<sync::ProfileCarry> profile_carry = std::make_shared<sync::ProfileCarry>();
  bool rank0() const { return cfg.rank == 0; }

  // --on-peer-loss shrink: who owns the backend, how a new world's backend is made, the agreement's store, the
  // current world, and what an in-place collective on the training state was about to overwrite (undo: put back
  // when a lost peer leaves it unfinished; in_place_undo.h). Rejoin: the rank and world size this process was
  // started as (the ids a joiner may have), whether it joins a live world, and when it looks for joiners (the same
  // steps on every rank). params..layer_steps: this rank's state once a loss is undone, what each attempt at a new
  // world starts from (taken only when a peer is lost).
  struct Shrink {
    // A look still in flight (a run left by an exception between two check steps) is waited for: the backend,
    // which outlives the trainer, writes its answer into look_flags.
    ~Shrink() {
      if (look) wait_all_quietly({look});
    }
    std::unique_ptr<Backend>* owner = nullptr;
    BackendMaker make;
    std::unique_ptr<KeyStore> store;
    Membership world;
    int start_rank = 0;
    int start_world = 1;
    bool joining = false;
    JoinCheck join_check;
    WorkPtr look;                     // the look for joiners launched at the last check step, not yet waited for
    std::vector<float> look_flags;    // its answer: 1 for each start rank that asked to join
    std::vector<JoinRequest> looked;  // rank 0: the requests it saw then (answered when the world grows)
    std::set<std::string> unreached;  // rank 0: requests (nonces) it could not reach, said once each
    // rank 0: the reach probes of joiners still in flight, by nonce (a probe of a cut-off address takes up to its
    // wait; the world does not stall for it, the answer is taken at a later check)
    std::map<std::string, std::future<bool>> probes;
    ReachCheck reach;
    std::shared_ptr<sync::InPlaceUndo> undo = std::make_shared<sync::InPlaceUndo>();
    std::vector<float> params, buffers, opt_state;
    std::vector<int64_t> layer_steps;
    std::vector<bool> lockstep;  // the failed step's lock-step layers on this rank (empty: not known)
    std::string fingerprint;  // this rank's configuration and profile (ElasticStart::fingerprint)
    // The first loss since the world was last full: when (this rank's clock, the start of the step it was detected
    // in) and in which step; -1 while the world is full. A rejoin that makes it full again reports the time since.
    double fault_t = -1;
    int64_t fault_step = -1;
    std::vector<int> dropped_joiners;  // joiners a loss during their admission left out (for the shrink's line)
    // Heartbeats (core/train/liveness.h), watching the members of `world` while it is live; before `store` goes.
    std::unique_ptr<Liveness> liveness;
  };
  // The liveness watch follows the world: off while it is rebuilt (the backend its verdicts abort is replaced).
  void watch_world();
  void unwatch_world();
  // What the last admit() moved from rank 0 to the joiners: bytes (once, not per receiver), messages, seconds.
  struct HealStats {
    int64_t bytes = 0, messages = 0, chunk_bytes = 0;
    double seconds = 0;
  };
  HealStats heal;
  std::unique_ptr<Shrink> shrink;
  std::shared_ptr<sync::InPlaceUndo> undo() const { return shrink ? shrink->undo : nullptr; }
  // After a loss: this rank's state, the unfinished in-place collectives undone, kept for every attempt at a new
  // world (returns the floats put back).
  size_t keep_recovery_start();
  // After a lost peer in `failed_step` (begun at t_step): agree, rebuild, restore; returns the step to continue at.
  int64_t shrink_world(int64_t failed_step, double t_step, const std::string& why, RunRecorder& rec,
                       Progress& progress);
  // What one rebuild took, for the shrink's line: seconds for the new backend's connect, the survivors' average
  // of parameters and buffers, the lock-step layers' optimizer state from rank 0 (how many layers), the new engine.
  struct RebuildTimes {
    double connect = 0, average = 0, state = 0, engine = 0;
    int state_layers = 0;
  };
  RebuildTimes rebuild_world(const Membership& next, int new_rank, int new_world, int64_t position, RunRecorder& rec);
  void report_rejoin(const Membership& old, const Membership& next, const std::vector<int>& joiners, double t0,
                     int64_t position, RunRecorder& rec, Progress& progress);
  void report_shrink(const Membership& old, const Membership& next, const double* t, const RebuildTimes& rebuild,
                     size_t undone, int64_t position, RunRecorder& rec, Progress& progress);
  // Collective: rank 0's per-layer optimizer step counts, taken by this rank when `take`; a rank with another
  // number of layers throws, naming `what`.
  void share_layer_steps(const char* what, bool take);
  // At the start of `step`: when the look launched at the last check step found joiners, the world grows (one average
  // of the old members, a new backend, admit()) and this returns true; otherwise, on a check step, rank 0 looks for
  // joiners and launches the broadcast that tells every rank, waited for at the next step.
  bool grow_world(int64_t step, RunRecorder& rec, Progress& progress);
  // At a check step: rank 0 reads the join requests, refuses those whose fingerprint differs from this world's
  // (rejoin-refused in /events), and the broadcast of those it admits (those it reaches) is launched.
  void launch_look(int64_t step, RunRecorder& rec, Progress& progress);
  // Rank 0, in launch_look: the joiner answers on the ranks' network (nothing while its probe is in flight).
  std::optional<bool> reached(const JoinRequest& j);
  // admit()'s transfer: rank 0's parameters and optimizer state layer by layer, then its buffers, in messages of
  // at most chunk_bytes (rank 0's DREAMDDP_HEAL_CHUNK_BYTES), to the joiners alone (a group split from the world
  // when it has other members). Fills `heal` (on rank 0 and the joiners).
  void transfer_state(bool joiner, int64_t chunk_bytes);
  // Collective, in a rebuilt world: the optimizer state `state` (this rank's, on the host) of the layers that were
  // lock-step in the failed step on any survivor (every layer where one does not know) becomes rank 0's; the
  // others keep their own. Returns how many layers that was.
  int lockstep_state_from_rank0(std::vector<float>& state);
  // Every member of a new world, the joiner too: rank 0's step, data position, parameters, buffers and optimizer
  // state (taken by the joiner), a new sharder and engine, and a hash of the state that every rank compares.
  // Returns the step the world continues at.
  int64_t admit(bool joiner, RunRecorder& rec);
  void end_elastic();  // the run is over: a joiner still waiting gives up

  // The parts of run(), each at its point of the loop (trainer.cpp).
  void start_run(RunLoop& L);
  void resume_with_engine(RunLoop& L, const ResumePlan& plan, const LoadedCheckpoint& c);
  void time_window(RunLoop& L);
  void train_one(int64_t step, double t0, RunLoop& L);
  void after_step(int64_t step, double t0, float lr, const StepResult& r, RunLoop& L);
  int64_t recover(int64_t step, double t0, const PeerLost& e, RunLoop& L);  // rethrows what shrink cannot take
  nlohmann::json finish_run(RunLoop& L);
  void on_agreed_anomaly(int64_t step, int anomalies, int64_t seen_at, RunRecorder& rec, Progress& progress);
  void checkpoint(int64_t step, RunRecorder& rec, const SensitivityProbe* probe);
  nlohmann::json evaluate_now(int64_t step);  // the consensus model; the last step first finalizes the engine
};

}  // namespace dd::train
