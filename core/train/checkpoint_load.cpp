// Loading a checkpoint: read and checked in full before a resume writes anything (parse_checkpoint), applied to
// the model, optimizer and engine once the engine exists (apply_checkpoint).
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/common/bytes.h"
#include "core/sync/engine/sync_session.h"
#include "core/train/checkpoint.h"
#include "core/train/checkpoint_file.h"
#include "core/train/sensitivity.h"

namespace dd::train {

// The fingerprint and step of a checkpoint body, checked against this run (dd::UsageError naming what differs).
static int64_t check_head(ByteReader& r, const std::string& path, const TrainConfig& cfg, const models::Model& m,
                          int from_world, int from_rank) {
  TrainConfig writer = cfg;  // the run that wrote the file, as far as the fingerprint names it
  if (from_world > 0) writer.world = from_world;
  if (from_rank >= 0) writer.rank = from_rank;
  const std::string want = checkpoint_fingerprint(writer, m), got = r.get_str();
  if (const std::string diff = fingerprint_diff(want, got); !diff.empty())
    throw UsageError("--resume: " + path + " is from another run configuration: " + diff);
  const int64_t step = r.get<int64_t>();
  if (step == cfg.steps - 1) throw UsageError("--resume: " + path + ": " + finished_run(step, cfg.steps));
  if (step < 0 || step >= cfg.steps)
    throw UsageError("--resume: " + path + " was written after step " + std::to_string(step) +
                     ", outside this run's steps 0.." + std::to_string(cfg.steps - 1) + " (raise --steps?)");
  return step;
}

LoadedCheckpoint parse_checkpoint(const std::string& path, const TrainConfig& cfg, const models::Model& m,
                                  const optim::Optimizer& opt, SensitivityProbe* probe, int from_world,
                                  int from_rank) {
  const std::string body = checkpoint_body(path);
  try {
    ByteReader r(body);
    LoadedCheckpoint c;
    c.path = path;
    c.step = check_head(r, path, cfg, m, from_world, from_rank);
    const size_t state_n = size_t(m.num_params()) * size_t(opt.state_slots());
    for (auto [v, n] : {std::pair{&c.params, size_t(m.num_params())}, std::pair{&c.buffers, size_t(m.num_buffers())},
                        std::pair{&c.opt_state, state_n}}) {
      v->resize(n);
      r.get_floats(v->data(), n);
    }
    c.layer_steps = r.get_vec<int64_t>();
    if (c.layer_steps.size() != size_t(m.num_layers()))
      throw UsageError("--resume: " + path + ": optimizer state of another model");
    c.engine = r.get_str();
    if (!r.done()) {
      const std::string ps = r.get_str();
      if (probe && !ps.empty()) probe->load_state(ps);
    }
    // The data position (absent in files of earlier versions: they all follow the plain order).
    c.data_position = (c.step + 1) * int64_t(from_world > 0 ? from_world : cfg.world) * cfg.batch;
    if (!r.done()) c.data_position = r.get<int64_t>();
    if (c.data_position < 0) throw UsageError("--resume: " + path + ": negative data position");
    if (!r.done()) throw UsageError("--resume: " + path + " has trailing bytes");
    return c;
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("--resume: " + path + ": " + e.what());
  }
}

void apply_checkpoint(const LoadedCheckpoint& c, models::Model& m, optim::Optimizer& opt,
                      sync::EngineState* engine) {
  ops::from_host(m.params(), c.params.data(), c.params.size());
  ops::from_host(m.buffers(), c.buffers.data(), c.buffers.size());
  ops::from_host(opt.state(), c.opt_state.data(), c.opt_state.size());
  opt.layer_steps() = c.layer_steps;
  if (!engine) return;
  if (c.engine.empty()) throw UsageError("--resume: " + c.path + " was written by a single-process run");
  try {
    engine->load_state(c.engine);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("--resume: " + c.path + ": " + e.what());
  }
}

int64_t read_checkpoint(const std::string& path, const TrainConfig& cfg, models::Model& m, optim::Optimizer& opt,
                        sync::EngineState* engine, SensitivityProbe* probe, int from_world, int from_rank,
                        int64_t* data_position) {
  const LoadedCheckpoint c = parse_checkpoint(path, cfg, m, opt, probe, from_world, from_rank);
  apply_checkpoint(c, m, opt, engine);
  if (data_position) *data_position = c.data_position;
  return c.step;
}

}  // namespace dd::train
