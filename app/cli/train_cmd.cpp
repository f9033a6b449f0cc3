// `dreamddp train`: parse, place the rank, check the run directory, connect (connect.h), train, print the
// summary (last line of rank 0's stdout: JSON).
#include <cstdio>
#include <cstdlib>

#include "app/cli/connect.h"
#include "app/cli/train_options.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "core/common/error.h"
#include "core/sync/policy/registry.h"
#include "core/train/checkpoint.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"

namespace dd::cli {

int cmd_train(int argc, char** argv) {
  train::TrainConfig cfg;
  if (!parse_train_options(argc, argv, cfg)) return 0;
  place_rank(cfg);
  // Resuming continues the run in its own directory unless --out says otherwise.
  if (!cfg.resume.empty() && cfg.out.empty()) cfg.out = cfg.resume;
  const data::InputSpec input = train::resolve_and_validate(cfg);
  check_rendezvous_scheme(cfg.rendezvous);  // also where one process never opens the store
  if (cfg.shrink_on_peer_loss && cfg.world > 1) {
    const std::string url = backend_options(cfg).rendezvous;
    if (url.rfind("file://", 0) != 0)
      throw UsageError("--on-peer-loss shrink: the survivors agree through a file:// rendezvous; " + url +
                       " is not one (pass --rendezvous file:///a/shared/dir, or --out for one under the run directory)");
  }
  // This rank has an intact checkpoint, or one this world size can resume (decided from the files alone, so every
  // rank refuses an impossible resume at once, before the rendezvous).
  if (!cfg.resume.empty()) train::plan_resume(cfg.resume, cfg);
  const bool continuing = !cfg.resume.empty() && cfg.out == cfg.resume;
  // Every output target is checked before the run dir is made and before the first step: a run must not train
  // to the end and then find its parameters unwritable.
  if (!cfg.out.empty()) train::check_output_dir("--out", cfg.out);
  if (!cfg.save_params.empty()) {
    const std::string mine = train::save_params_path(cfg.save_params, cfg.rank);
    if (!mine.empty()) train::check_output_file("--save-params", mine, cfg.out);
  }
  // The data is read before the run directory is made: a missing or corrupt dataset leaves nothing behind.
  train::RunData data = train::load_run_data(cfg, input);
  if (!cfg.out.empty()) train::prepare_run_dir(cfg.out, cfg.overwrite, cfg.rank == 0 && !continuing);
  auto backend = connect(cfg);
  if (cfg.rank == 0)
    std::fprintf(stderr, "train: %s on %s, %d rank(s), batch %lld/rank, %lld steps, policy %s, %d thread(s)/rank\n",
                 cfg.model.c_str(), cfg.data.c_str(), cfg.world, (long long)cfg.batch, (long long)cfg.steps,
                 cfg.policy.c_str(), cfg.threads);
  if (cfg.rank == 0)  // a switch the run never reaches breaks nothing, but the user meant something by it
    for (const auto& sw : sync::parse_switches(cfg.switches))
      if (sw.step >= cfg.steps)
        std::fprintf(stderr, "train: note: --switch %lld:%s is not before the last step (%lld steps): it will not "
                     "apply in this run\n", (long long)sw.step, sw.spec.c_str(), (long long)cfg.steps);
  train::Trainer t(cfg, backend.get(), &data);
  if (backend && cfg.shrink_on_peer_loss) {
    // The survivors of a lost peer agree in the rendezvous directory and meet there again, under a fresh key
    // prefix per generation (docs/elastic.md "Shrink without restart").
    const BackendOptions base = backend_options(cfg);
    t.enable_shrink(&backend, [base](int rank, int world, const std::string& prefix) {
      BackendOptions o = base;
      o.rank = rank;
      o.world = world;
      o.prefix = prefix;
      return make_backend(o);
    }, base.rendezvous.substr(7) + "/shrink");
  }
  auto summary = t.run();
  if (backend) backend->barrier();
  if (cfg.rank == 0) std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace dd::cli
