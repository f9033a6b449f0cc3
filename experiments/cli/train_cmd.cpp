// `dreamddp train`: parse, place the rank, check the run directory, connect the backend, agree on the
// configuration with every peer, train, print the summary (last line of rank 0's stdout: JSON).
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "backends/backend.h"
#include "core/common/error.h"
#include "core/sync/policy.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"
#include "experiments/cli/train_options.h"
#include "experiments/commands.h"

namespace dd::cli {
namespace {

// The fields every rank must agree on, as "key=value" lines.
std::string config_fingerprint(const train::TrainConfig& c) {
  std::ostringstream s;
  s << "model=" << c.model << "\npolicy=" << c.policy << "\nseed=" << c.seed << "\nbatch=" << c.batch
    << "\nworld=" << c.world << "\nbackend=" << c.backend << "\nsteps=" << c.steps << "\ndata=" << c.data
    << "\noptimizer=" << c.optimizer << "\nlr=" << c.lr << "\n";
  for (auto& sw : c.switches) s << "switch=" << sw << "\n";
  return s.str();
}

// Refuses ranks whose configuration differs from rank 0's, naming the fields.
void handshake(Backend& b, const train::TrainConfig& c) {
  auto all = b.allgather(config_fingerprint(c));
  auto fields = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    return v;
  };
  auto mine = fields(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    auto theirs = fields(all[r]);
    std::string diff;
    for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
      std::string a = i < mine.size() ? mine[i] : "", t = i < theirs.size() ? theirs[i] : "";
      if (a != t) diff += (diff.empty() ? "" : ", ") + t.substr(0, t.find('=')) + " (rank 0: " + a + ", rank " +
                          std::to_string(r) + ": " + t + ")";
    }
    throw UsageError("ranks disagree on the configuration: " + diff);
  }
}

}  // namespace

int cmd_train(int argc, char** argv) {
  train::TrainConfig cfg;
  if (!parse_train_options(argc, argv, cfg)) return 0;
  place_rank(cfg);
  train::resolve_and_validate(cfg);
  sync::make_policy(sync::PolicySpec::parse(cfg.policy));  // reject a bad spec before any work
  if (!cfg.out.empty()) train::prepare_run_dir(cfg.out, cfg.overwrite, cfg.rank == 0);
  std::unique_ptr<Backend> backend;
  if (cfg.world > 1) {
    BackendOptions bo;
    bo.kind = cfg.backend;
    bo.rank = cfg.rank;
    bo.world = cfg.world;
    bo.rendezvous = cfg.rendezvous;
    if (bo.rendezvous.empty())
      if (const char* env = std::getenv("DREAMDDP_RENDEZVOUS")) bo.rendezvous = env;
    if (bo.rendezvous.empty() && cfg.backend == "gloo") {
      if (cfg.out.empty())
        throw UsageError("several ranks need --rendezvous (or --out for a file store under the run directory)");
      bo.rendezvous = "file://" + cfg.out + "/.rendezvous";
    }
    bo.iface = cfg.iface;
    bo.timeout_s = cfg.timeout_s;
    backend = make_backend(bo);
    handshake(*backend, cfg);
  }
  if (cfg.rank == 0)
    std::fprintf(stderr, "train: %s on %s, %d rank(s), batch %lld/rank, %lld steps, policy %s, %d thread(s)/rank\n",
                 cfg.model.c_str(), cfg.data.c_str(), cfg.world, (long long)cfg.batch, (long long)cfg.steps,
                 cfg.policy.c_str(), cfg.threads);
  train::Trainer t(cfg, backend.get());
  auto summary = t.run();
  if (backend) backend->barrier();
  if (cfg.rank == 0) std::printf("%s\n", summary.dump().c_str());
  return 0;
}

int cmd_profile(int argc, char** argv) {
  (void)argc;
  (void)argv;
  throw UsageError("profile: not built yet in this version (use dreamddp:h=H, which profiles itself)");
}

}  // namespace dd::cli
