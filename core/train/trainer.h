// The training loop of one rank (docs/design.md "One training step"): data shard, forward, backward with the sync
// hook, per-layer update, evaluation, progress line, telemetry and the run summary.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/data/dataset.h"
#include "core/train/config.h"
#include "core/train/elastic.h"

namespace dd {
class Backend;
}
namespace dd::models {
class Model;
}

namespace dd::train {

// The training and test sets of a run.
struct RunData {
  data::Dataset train, test;
};

// What the model reads, for the data side (shape, tokens, classes or vocabulary).
data::InputSpec input_spec_of(const models::Model& m, const std::string& spec);

// Loads --data for a model that reads `input` (dd::UsageError for a missing or corrupt dataset). `dreamddp train`
// calls it before the run directory is made, so that bad data leaves nothing behind.
RunData load_run_data(const TrainConfig& cfg, const data::InputSpec& input);

class Trainer {
 public:
  // `backend` may be null for a single process. The trainer does not own it. `data`: the sets load_run_data()
  // returned (moved from); null: the trainer loads them.
  Trainer(const TrainConfig& cfg, Backend* backend, RunData* data = nullptr);
  ~Trainer();
  // Runs the configured steps; returns summary.json's content (also written to --out by rank 0).
  nlohmann::json run();

  // --on-peer-loss shrink (docs/elastic.md): the trainer replaces the backend `*owner` holds (the one passed to the
  // constructor) by the backend of each new world, made by make(rank, world, key prefix); the survivors agree
  // through `store` (the rendezvous's key store, backends/key_store.h).
  // A live world also admits ranks started again (docs/elastic.md "Rejoin"). `joined`: this process is such a
  // joiner, admitted to that world (cfg.rank/cfg.world of the constructor are its place there); start_rank and
  // start_world: the rank and world size it was started as.
  using BackendMaker = std::function<std::unique_ptr<Backend>(int rank, int world, const std::string& prefix)>;
  struct ElasticStart {
    int start_rank = 0;
    int start_world = 1;
    std::optional<Membership> joined;
    ReachCheck reach;  // reachability on the ranks' network for the agreement (none: the store alone decides)
    // This rank's configuration and profile ("key=value" lines, the world size it was started with): rank 0 of a
    // live world refuses a joiner whose fingerprint differs from its own.
    std::string fingerprint;
  };
  // A joiner builds its trainer (model, optimizer, data) before it asks to join, off the live world's critical
  // path, without a backend; once admitted it hands over the backend of the world it joins and its place there.
  void attach(Backend* backend, int rank, int world);
  // The training and test sets, handed back (this trainer cannot train afterwards): a rank excluded from its world
  // builds a joiner's trainer on them without reading them again.
  RunData release_data();
  void enable_shrink(std::unique_ptr<Backend>* owner, BackendMaker make, std::unique_ptr<KeyStore> store,
                     const ElasticStart& start);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Fills defaults that depend on other fields (optimizer, lr, warm-up, threads) and validates ranges, and that
// --data fits --model (data::check_fits; nothing is read). Throws dd::UsageError naming the option. Returns what
// the model reads, for load_run_data().
data::InputSpec resolve_and_validate(TrainConfig& cfg);
// cfg.policy_spec and cfg.policy_switches from cfg.policy and cfg.switches (resolve_and_validate calls it; the
// Trainer again only when they no longer match, a config changed after validation). Throws dd::UsageError.
void parse_policy_specs(TrainConfig& cfg);
bool policy_specs_current(const TrainConfig& cfg);

}  // namespace dd::train
