// `dreamddp train`: parse, place the rank, check the run directory, connect (connect.h), train, print the
// summary (last line of rank 0's stdout: JSON).
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "app/cli/connect.h"
#include "app/cli/train_options.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "backends/common/reach_probe.h"
#include "backends/key_store.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/common/crc.h"
#include "core/ops/ops.h"
#include "core/sync/policy/registry.h"
#include "core/train/checkpoint.h"
#include "core/train/elastic.h"
#include "core/train/run_dir.h"
#include "core/train/trainer.h"

namespace dd::cli {

namespace {

// `train --rejoin` (docs/elastic.md "Rejoin"): asks the live world of the rendezvous to admit this rank, waits for
// its answer (at the world's next check step), and connects to that world. cfg.rank/cfg.world become this rank's
// place in it; `start` keeps what it was started as, and the world it joins.
std::unique_ptr<Backend> join_live_world(train::TrainConfig& cfg, train::Trainer::ElasticStart* start) {
  const BackendOptions base = backend_options(cfg);
  auto store = make_key_store(base.rendezvous, "shrink");
  const std::string nonce = train::process_nonce();
  const double wait_s = std::max(60.0, 4 * cfg.timeout_s + 30);
  train::post_join(*store, "shrink", cfg.rank, nonce, start->reach.address, start->fingerprint);
  std::fprintf(stderr, "train: rank %d asks to join the live run of %s (waiting up to %.0f s)\n", cfg.rank,
               base.rendezvous.c_str(), wait_s);
  const double t0 = now_s();
  const train::Membership m = train::await_join(*store, "shrink", cfg.rank, nonce, wait_s);
  const int me = cfg.rank;
  cfg.rank = int(std::find(m.members.begin(), m.members.end(), me) - m.members.begin());
  cfg.world = int(m.members.size());
  std::fprintf(stderr, "train: rank %d admitted after %.2f s as rank %d of %d (generation %d), at step %lld\n", me,
               now_s() - t0, cfg.rank, cfg.world, m.generation, (long long)m.step);
  BackendOptions o = base;
  o.rank = cfg.rank;
  o.world = cfg.world;
  o.prefix = "dd-g" + std::to_string(m.generation);
  o.connect_s = std::max(2 * o.timeout_s, 5.0);  // the members meet it at once, as after a shrink (below)
  start->joined = m;
  return make_backend(o);
}

// Under shrink: a probe on the ranks' network, so that the survivors' agreement can fence out a member that a
// partition cut off while the rendezvous store stays reachable (core/train/elastic.h ReachCheck). Without one (no
// socket can be bound) the store alone decides, as the note says.
train::ReachCheck reach_check(const train::TrainConfig& cfg) {
  try {
    auto probe = std::make_shared<ReachProbe>(cfg.iface);
    const double wait_s = std::min(1.0, cfg.timeout_s);
    return {probe->address(), [probe, wait_s](const std::string& a) { return ReachProbe::reaches(a, wait_s); }};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: note: %s; a partition that leaves the rendezvous store reachable is not fenced\n",
                 e.what());
    return {};
  }
}

// What a live world compares with a joiner's (docs/elastic.md "Rejoin"): the configuration of the start-up
// handshake and, for a policy given a profile (profile=DIR), a CRC-32 of that directory's files.
std::string join_fingerprint(const train::TrainConfig& cfg) {
  std::string fp = config_fingerprint(cfg);
  const std::string dir = cfg.policy_spec.get_str("profile", "");
  if (dir.empty()) return fp;
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  uint32_t crc = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    crc = crc32_of(bytes.data(), bytes.size(), crc32_of(f.filename().string().data(), f.filename().string().size(), crc));
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  return fp + "profile=" + dir + " crc " + hex + "\n";
}

// Connects, trains and prints the summary, in one world: everything after the run directory is prepared. A rank
// the others excluded gets train::Excluded, with `data` handed back for a joiner's trainer.
int train_in_world(train::TrainConfig& cfg, train::RunData& data, bool joining) {
  train::Trainer::ElasticStart start{cfg.rank, cfg.world, std::nullopt, {}, {}};
  if (cfg.shrink_on_peer_loss && cfg.world > 1) {
    start.reach = reach_check(cfg);
    start.fingerprint = join_fingerprint(cfg);
  }
  // A joiner builds its model, optimizer and data before it asks to join: the live world waits for none of it.
  std::unique_ptr<train::Trainer> joiner_trainer;
  if (joining) joiner_trainer = std::make_unique<train::Trainer>(cfg, nullptr, &data);
  std::unique_ptr<Backend> backend = joining ? join_live_world(cfg, &start) : connect(cfg);
  if (cfg.rank == 0)
    std::fprintf(stderr, "train: %s on %s, %d rank(s), batch %lld/rank, %lld steps, policy %s, %d thread(s)/rank\n",
                 cfg.model.c_str(), cfg.data.c_str(), cfg.world, (long long)cfg.batch, (long long)cfg.steps,
                 cfg.policy.c_str(), cfg.threads);
  if (cfg.rank == 0)  // a switch the run never reaches breaks nothing, but the user meant something by it
    for (const auto& sw : cfg.policy_switches)
      if (sw.step >= cfg.steps)
        std::fprintf(stderr, "train: note: --switch %lld:%s is not before the last step (%lld steps): it will not "
                     "apply in this run\n", (long long)sw.step, sw.spec.text.c_str(), (long long)cfg.steps);
  std::unique_ptr<train::Trainer> made;
  if (joining) joiner_trainer->attach(backend.get(), cfg.rank, cfg.world);
  else made = std::make_unique<train::Trainer>(cfg, backend.get(), &data);
  train::Trainer& t = joining ? *joiner_trainer : *made;
  if (backend && cfg.shrink_on_peer_loss) {
    // The survivors of a lost peer agree in the rendezvous directory and meet there again, under a fresh key
    // prefix per generation (docs/elastic.md "Shrink without restart").
    const BackendOptions base = backend_options(cfg);
    t.enable_shrink(&backend, [base](int rank, int world, const std::string& prefix) {
      BackendOptions o = base;
      o.rank = rank;
      o.world = world;
      o.prefix = prefix;
      // The members of a new world meet at once (they have just agreed): a member that cannot be reached (lost
      // meanwhile, or partitioned) fails the connect within this, and the others agree again without it.
      o.connect_s = std::max(2 * o.timeout_s, 5.0);
      return make_backend(o);
    }, make_key_store(base.rendezvous, "shrink"), start);
  }
  nlohmann::json summary;
  try {
    summary = t.run();
  } catch (const train::Excluded&) {
    data = t.release_data();
    throw;
  }
  if (backend) {
    try {
      backend->barrier();
    } catch (const PeerLost& e) {
      // Under shrink a peer lost after the last step ends nothing: this rank's outputs are complete.
      if (!cfg.shrink_on_peer_loss) throw;
      std::fprintf(stderr, "train: note: a peer was lost after the last step; the run is complete (%s)\n", e.what());
    }
  }
  if (cfg.rank == 0) std::printf("%s\n", summary.dump().c_str());
  return 0;
}

// Under shrink, a rank excluded from the world (stopped or cut off while the others agreed) asks the live world to
// admit it again from this process, as a restarted one would (docs/elastic.md "Rejoin"), up to
// --rejoins-in-place times: its data stays loaded and no launcher has to notice its exit first.
int train_in_run_dir(train::TrainConfig& cfg, train::RunData& data, bool joining) {
  const train::TrainConfig started = cfg;
  const int in_place = cfg.rejoins_in_place < 0 ? 8 : cfg.rejoins_in_place;
  for (int n = 1;; ++n) {
    try {
      return train_in_world(cfg, data, joining);
    } catch (const train::Excluded& e) {
      if (n > in_place) throw;
      std::fprintf(stderr, "train: rank %d: %s; it asks to join again from this process (%d of %d)\n",
                   started.rank, e.what(), n, in_place);
      cfg = started;
      cfg.rejoin = true;
      cfg.resume.clear();
      joining = true;
    }
  }
}

}  // namespace

int cmd_train(int argc, char** argv) {
  train::TrainConfig cfg;
  if (!parse_train_options(argc, argv, cfg)) return 0;
  ops::set_subnormals(cfg.subnormals);  // before any thread starts: the backend's starts with this mode
  place_rank(cfg);
  // A joiner takes its state from the live world, not from a checkpoint (docs/elastic.md "Rejoin").
  const bool joining = cfg.rejoin && cfg.world > 1;
  if (joining) cfg.resume.clear();
  // Resuming continues the run in its own directory unless --out says otherwise.
  if (!cfg.resume.empty() && cfg.out.empty()) cfg.out = cfg.resume;
  const data::InputSpec input = train::resolve_and_validate(cfg);
  check_rendezvous_scheme(cfg.rendezvous);  // also where one process never opens the store
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
  // A refusal found only once the run has started (the checkpoint the ranks agree on is past --steps, a peer's
  // configuration differs) leaves no directory either: one this process made is removed again while it is still
  // empty (std::filesystem::remove never removes a directory that holds anything).
  const bool made_out = !cfg.out.empty() && !std::filesystem::exists(cfg.out);
  if (!cfg.out.empty()) train::prepare_run_dir(cfg.out, cfg.overwrite, cfg.rank == 0 && !continuing && !joining);
  try {
    return train_in_run_dir(cfg, data, joining);
  } catch (const UsageError&) {
    std::error_code ec;
    if (made_out) std::filesystem::remove(cfg.out, ec);
    throw;
  }
}

}  // namespace dd::cli
