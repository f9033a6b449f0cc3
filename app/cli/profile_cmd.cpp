// `dreamddp profile`: measures per-layer backward and all-reduce times of this model, backend and network, and
// writes bp.json / comm.json (the artifact's format), overlap.json and step.json for `dreamddp schedule`,
// `dreamddp:profile=DIR` and `dreamddp simulate`.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/connect.h"
#include "app/cli/train_options.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/sharder.h"
#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/optimizer.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/profile/comm_fit.h"
#include "core/sync/profile/profiler.h"
#include "core/train/anomaly.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"
#include "core/train/trainer_parts.h"

namespace dd::cli {

namespace {

// `--help` prints what profile does before train's options (which parse_train_options prints).
void print_usage_if_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs("usage: dreamddp profile --model M --out DIR [train's options below: --batch, --threads, --steps (10),\n"
                 "                        --backend, --rendezvous, ...]; run under `dreamddp launch -n N` for N ranks\n"
                 "  measures this setup's per-layer backward and all-reduce times, the forward and optimizer update of a\n"
                 "  step, and how much overlapped communication and compute slow each other; writes DIR/bp.json,\n"
                 "  DIR/comm.json, DIR/step.json, DIR/overlap.json, DIR/meta.json and DIR/bytes.json\n\n", stdout);
      break;
    }
}

// DIR/meta.json (what the profile was measured on) and DIR/bytes.json (each layer's size): `simulate --profile
// DIR` needs nothing else. Returns the all-reduce model the engine fits to its own timings (comm_fit.h), here
// over every layer's measurement.
sync::CommFit write_meta_and_bytes(const train::TrainConfig& cfg, const Backend* backend, models::Model& model,
                                   const sync::LayerProfile& p, int steps) {
  nlohmann::ordered_json meta, bytes;
  meta["model"] = cfg.model;
  meta["data"] = cfg.data;
  meta["batch"] = cfg.batch;
  meta["threads"] = cfg.threads;
  meta["subnormals"] = subnormals_name(cfg.subnormals);
  meta["precision"] = precision_name(cfg.precision);
  meta["world"] = cfg.world;
  meta["backend"] = backend ? backend->name() : std::string("none");
  meta["steps"] = steps;
  // How the ranks shared their machines' cores: with "one rank at a time", `simulate --shared-cores
  // CORES,threads=T` shares them again (experiments/sim_validate.sh does).
  meta["machine"] = {{"cores", p.shared.cores},
                     {"ranks", p.shared.ranks},
                     {"passes", p.shared.oversubscribed ? "one rank at a time" : "every rank at once"}};
  std::vector<int64_t> sizes;
  for (const auto& l : sync::layer_metas(model.layers())) bytes[l.name] = l.bytes, sizes.push_back(l.bytes);
  const sync::CommFit fit = sync::fit_comm(sizes, p.comm);
  if (cfg.world > 1) meta["comm_fit"] = {{"alpha_s", fit.alpha_s}, {"per_byte_s", fit.per_byte_s}};
  train::write_file_atomic(cfg.out + "/meta.json", meta.dump(1) + "\n");
  train::write_file_atomic(cfg.out + "/bytes.json", bytes.dump(1) + "\n");
  return fit;
}

// The per-layer table, the totals, the fitted all-reduce model and (several ranks) each rank's median pass.
void print_profile(const train::TrainConfig& cfg, const Backend* backend, const sync::LayerProfile& p,
                   const sync::CommFit& fit) {
  double B = 0, C = 0;
  std::printf("%-28s %12s %12s\n", "layer", "backward_ms", "allreduce_ms");
  for (size_t l = 0; l < p.names.size(); ++l) {
    std::printf("%-28s %12.4f %12.4f\n", p.names[l].c_str(), p.bp[l] * 1e3, p.comm[l] * 1e3);
    B += p.bp[l];
    C += p.comm[l];
  }
  std::printf("model %s, batch %lld/rank, %d rank(s), backend %s: forward %.3f ms, B = %.3f ms, update %.3f ms, "
              "C = %.3f ms; while they overlap compute x%.3f, communication x%.3f -> "
              "%s/{bp,comm,step,overlap,meta,bytes}.json\n",
              cfg.model.c_str(), (long long)cfg.batch, cfg.world, backend ? backend->name().c_str() : "none",
              p.forward_s * 1e3, B * 1e3, p.update_s * 1e3, C * 1e3, 1 + p.contention.compute,
              1 + p.contention.comm, cfg.out.c_str());
  if (cfg.world > 1 && fit.per_byte_s > 0)
    std::printf("all-reduce model c(bytes) = %.3f ms + bytes / %.1f MB/s (the fit the engine makes: rate from the "
                "largest layers, latency from the small)\n",
                fit.alpha_s * 1e3, 1e-6 / fit.per_byte_s);
  if (p.rank_pass_s.size() > 1) {
    std::string each;
    char ms[32];
    for (double t : p.rank_pass_s) {
      std::snprintf(ms, sizeof ms, "%s%.3f", each.empty() ? "" : ", ", t * 1e3);
      each += ms;
    }
    std::printf("each rank's median pass (ms): %s; the times above are paced to the slowest\n", each.c_str());
  }
  if (p.shared.oversubscribed)
    std::printf("%d ranks x %d thread(s) on %d cores: passes timed one rank at a time (simulate --shared-cores "
                "%d,threads=%d shares the cores again)\n",
                p.shared.ranks, cfg.threads, p.shared.cores, p.shared.cores, cfg.threads);
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  train::TrainConfig cfg;
  cfg.steps = 10;           // profiling needs a few passes, not a training run
  cfg.data = "synthetic";   // timing does not depend on the data
  print_usage_if_asked(argc, argv);
  if (!parse_train_options(argc, argv, cfg)) return 0;
  ops::set_subnormals(cfg.subnormals);
  if (cfg.out.empty()) throw UsageError("profile: --out DIR is required (bp.json and comm.json go there)");
  train::check_output_dir("--out", cfg.out);  // before the measurement, not after it
  place_rank(cfg);
  const data::InputSpec input = train::resolve_and_validate(cfg);
  auto backend = connect(cfg);
  ops::set_threads(cfg.threads);
  ops::set_precision(cfg.precision);
  auto model = models::make_model(cfg.model, cfg.seed);
  auto ds = data::open_dataset(cfg.data, cfg.data_dir, true, input, cfg.seed);
  data::Sharder sharder(ds.size, cfg.seed, cfg.world, cfg.rank, cfg.batch);
  data::Batch b;
  std::vector<int64_t> idx(cfg.batch);
  auto batch = [&](int step) {
    sharder.indices(step, idx.data());
    data::gather(ds, idx.data(), cfg.batch, &b);
    return train::make_input(b);
  };
  sync::ProfileOptions po;
  po.steps = int(std::min<int64_t>(cfg.steps, 1000));
  po.threads = cfg.threads;
  // The update a training step runs, timed: the anomaly guard's gradient check (unless --anomaly off), then the
  // optimizer.
  optim::Optimizer opt(train::optim_config(cfg), *model);
  train::AnomalyGuard guard(cfg.anomaly_spike, 20);
  const bool scan = cfg.anomaly != train::AnomalyMode::Off;
  auto update = [&](int l) {
    if (!scan || guard.admit_layer(*model, l)) opt.update_layer(l, cfg.lr);
  };
  auto p = sync::measure_profile(*model, batch, backend.get(), po, update);
  if (cfg.rank == 0) {
    sync::write_profile(cfg.out, p, cfg.overwrite);
    const sync::CommFit fit = write_meta_and_bytes(cfg, backend.get(), *model, p, po.steps);
    print_profile(cfg, backend.get(), p, fit);
  }
  if (backend) backend->barrier();
  return 0;
}

}  // namespace dd::cli
