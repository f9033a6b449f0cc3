// Shrink without restart and rejoin with live recovery (docs/elastic.md): the trainer's side of a world that
// loses members and admits them again. The agreement and the key store are in elastic.cpp, a joiner's transfer of
// the state in trainer_heal.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/trainer_impl.h"

namespace dd::train {
namespace {

// --heartbeat: as given (0: off), or by default a tenth of the timeout, at least 1 s and at most the timeout.
double heartbeat_seconds(const TrainConfig& c) {
  if (c.heartbeat_s >= 0) return c.heartbeat_s;
  return std::min(c.timeout_s, std::max(1.0, c.timeout_s / 10));
}

}  // namespace

void Trainer::enable_shrink(std::unique_ptr<Backend>* owner, BackendMaker make, std::unique_ptr<KeyStore> store,
                            const ElasticStart& start) {
  auto& I = *impl_;
  if (!owner || !*owner || owner->get() != I.backend) throw std::logic_error("enable_shrink: not this trainer's backend");
  auto s = std::make_unique<Impl::Shrink>();
  s->owner = owner;
  s->make = std::move(make);
  s->store = std::move(store);
  s->start_rank = start.start_rank;
  s->start_world = start.start_world;
  s->reach = start.reach;
  s->fingerprint = start.fingerprint;
  heal_chunk_bytes();  // the testing and tuning knobs of a rejoin's transfer, checked before the first step
  heal_pause_after();
  if (start.joined) {
    s->world = *start.joined;
    s->joining = true;
  } else {
    for (int r = 0; r < I.cfg.world; ++r) s->world.members.push_back(r);
  }
  // The training state: what an unfinished in-place collective must not leave behind (gradients are not: a
  // redone step computes them again).
  for (ops::DeviceFloats* a : {&I.model->params(), &I.model->buffers(), &I.opt->state()})
    s->undo->protect(a->data(), a->size(), a->device());
  const double silent_s = heartbeat_seconds(I.cfg);
  if (silent_s > 0 && s->start_world > 1) {
    // A verdict (on the heartbeat thread, while the world is watched, so `backend` is this world's): the member is
    // recorded lost, so that the survivors' agreement need not wait out its join window, and this rank's operations
    // with it fail now rather than at their timeout. A member that was only slow finds itself excluded, as after a
    // partition, and may ask to join again.
    const int me = s->start_rank;
    KeyStore* store = s->store.get();
    s->liveness = std::make_unique<Liveness>(
        *store, "shrink", me, process_nonce(), silent_s,
        [&I, store, me](int id, int rank, double still) {
          char why[96];
          std::snprintf(why, sizeof why, "silent: its heartbeat stood still for %.1f s", still);
          try {
            report_lost(*store, "shrink", id, why);
          } catch (const std::exception&) {
          }
          std::fprintf(stderr, "train: rank %d (started as rank %d): rank %d (started as rank %d) %s; lost\n",
                       I.cfg.rank, me, rank, id, why);
          if (I.backend) I.backend->abort_peer(rank, std::string("(started as rank ") + std::to_string(id) + ") " + why);
        });
  }
  I.shrink = std::move(s);
  if (!I.shrink->joining) I.watch_world();
}

void Trainer::Impl::watch_world() {
  if (shrink && shrink->liveness) shrink->liveness->watch(shrink->world.members);
}

void Trainer::Impl::unwatch_world() {
  if (shrink && shrink->liveness) shrink->liveness->unwatch();
}

size_t Trainer::Impl::keep_recovery_start() {
  const size_t undone = shrink->undo->undo();
  shrink->params = ops::to_host(model->params());
  shrink->buffers = ops::to_host(model->buffers());
  shrink->opt_state = ops::to_host(opt->state());
  shrink->layer_steps = opt->layer_steps();
  return undone;
}

void Trainer::Impl::share_layer_steps(const char* what, bool take) {
  std::string mine;
  if (rank0())
    for (size_t i = 0; i < opt->layer_steps().size(); ++i) mine += (i ? "," : "") + std::to_string(opt->layer_steps()[i]);
  std::istringstream v(backend->allgather(mine)[0]);
  std::vector<int64_t> ls;
  for (std::string x; std::getline(v, x, ',');) ls.push_back(std::stoll(x));
  if (ls.size() != opt->layer_steps().size())
    throw std::runtime_error(std::string(what) + ": rank 0 has " + std::to_string(ls.size()) +
                             " optimizer layers, this rank " + std::to_string(opt->layer_steps().size()) +
                             " (not the same model?)");
  if (take) opt->layer_steps() = ls;
}

// A new world of the agreed members: its backend, this rank's state where it failed (unfinished collectives
// undone) averaged across the survivors, a new sharder and engine. Throws PeerLost when another member is lost.
Trainer::Impl::RebuildTimes Trainer::Impl::rebuild_world(const Membership& next, int new_rank, int new_world,
                                                         int64_t position, RunRecorder& rec) {
  Shrink& S = *shrink;
  const double t0 = now_s();
  *S.owner = S.make(new_rank, new_world, "dd-g" + std::to_string(next.generation));
  backend = S.owner->get();
  cfg.rank = new_rank;
  cfg.world = new_world;
  // This rank's state where it failed (unfinished collectives undone), averaged across the survivors on the host
  // (each attempt starts again from the kept copy), then put back on the model's device.
  std::vector<float> params = S.params, buffers = S.buffers, opt_state = S.opt_state;
  const double t1 = now_s();
  if (!params.empty()) backend->allreduce(params.data(), params.size(), ReduceOp::Avg)->wait();
  if (!buffers.empty()) backend->allreduce(buffers.data(), buffers.size(), ReduceOp::Avg)->wait();
  // Survivors may have got to different points of different steps (one finished the step the others failed in):
  // the optimizer's step counts, and its state of the layers that were lock-step, become rank 0's, or ranks whose
  // lock-step parameters are now equal would go on updating them differently (ddp never averages them again). A
  // local layer's state stays each rank's own, as between its averages (and as an old member's at a rejoin).
  const double t2 = now_s();
  RebuildTimes r;
  r.state_layers = opt_state.empty() ? 0 : lockstep_state_from_rank0(opt_state);
  const double t3 = now_s();
  ops::from_host(model->params(), params.data(), params.size());
  ops::from_host(model->buffers(), buffers.data(), buffers.size());
  ops::from_host(opt->state(), opt_state.data(), opt_state.size());
  opt->layer_steps() = S.layer_steps;
  share_layer_steps("shrink", true);
  auto moved = std::make_unique<data::Sharder>(train.size, cfg.seed, new_world, new_rank, cfg.batch);
  moved->continue_at(next.step, position);
  sharder = std::move(moved);
  // The survivors scale the profile they carry when every one of them carries the same (a loss inside the
  // collective that agreed it may have left some without it); otherwise the new engine profiles again.
  const sync::ProfileCarry carried = *profile_carry;
  const auto prints = backend->allgather(carried.fingerprint());
  const bool same = carried.has() && std::all_of(prints.begin(), prints.end(),
                                                 [&](const std::string& p) { return p == prints[0]; });
  engine = make_engine_for(cfg, *model, *opt, *backend, rec.metrics(), *dev, next.step, profile_carry,
                           same ? &carried : nullptr, S.undo);
  r.connect = t1 - t0, r.average = t2 - t1, r.state = t3 - t2, r.engine = now_s() - t3;
  return r;
}

int64_t Trainer::Impl::shrink_world(int64_t failed_step, double t_step, const std::string& why, RunRecorder& rec,
                                    Progress& progress) {
  Shrink& S = *shrink;
  const double t_detect = now_s();
  const Membership old = S.world;
  // Every wait below is bounded: the join window covers a peer still blocked in a collective until its timeout
  // (the backend makes no post-mortem under shrink, BackendOptions::postmortem_s), and a member that the launcher
  // saw end is not waited for (report_lost); a member that dies during the rebuild fails the new backend's connect (or
  // its first collective) within its timeout, and the survivors agree again, on a smaller world.
  AgreeTiming timing;
  timing.join_s = cfg.timeout_s + 2;
  timing.decide_s = timing.join_s;
  std::string cause = why;
  size_t undone = 0;
  std::fprintf(stderr, "train: rank %d (started as rank %d): peer lost in step %lld; agreeing on the survivors "
               "(window %.0f s): %s\n", cfg.rank, S.start_rank, (long long)failed_step, timing.join_s, why.c_str());
  S.look = nullptr;  // a look for joiners in flight goes with the failed world (the check restarts below)
  unwatch_world();
  S.lockstep = engine ? engine->probe.lockstep_layers() : std::vector<bool>();
  for (size_t attempt = 0;; ++attempt) {
    // The engine's collectives have failed and it refers to the backend: both go, which closes this rank's
    // sockets, so peers still blocked on them fail at once.
    engine.reset();
    backend = nullptr;
    S.owner->reset();
    // No thread writes the state any more: what the failed step finished stays, an in-place collective it left
    // unfinished is undone, and that is what every attempt below starts from.
    if (attempt == 0) undone = keep_recovery_start();
    if (attempt > old.members.size())
      throw PeerLost("on-peer-loss shrink: no stable world after " + std::to_string(attempt) + " attempts: " + cause);
    Membership next;
    try {
      next = agree_survivors(*S.store, "shrink", S.world, S.start_rank, failed_step, timing,
                             S.reach.reaches ? &S.reach : nullptr);
    } catch (const QuorumLost& e) {
      if (auto* w = rec.metrics()) {
        w->append_event(failed_step, "shrink-quorum-lost", e.what());
        rec.finish_partial();
      }
      throw;
    }
    const double t_agreed = now_s();
    const int new_rank = int(std::find(next.members.begin(), next.members.end(), S.start_rank) - next.members.begin());
    const int new_world = int(next.members.size());
    const int64_t position = sharder->position_of(next.step);
    RebuildTimes rebuilt;
    try {
      rebuilt = rebuild_world(next, new_rank, new_world, position, rec);
    } catch (const QuorumLost&) {
      throw;
    } catch (const PeerLost& e) {
      cause = e.what();
      S.world = next;
      continue;  // lost another member while rebuilding: agree again, one generation on
    }
    const double t_done = now_s();
    S.world = next;
    watch_world();
    if (S.fault_t < 0) S.fault_t = t_step, S.fault_step = failed_step;  // the world was full until this loss
    S.join_check.restart_at(next.step);  // survivors that did and did not pass a check step before the loss agree
    const double times[4] = {t_detect - t_step, t_agreed - t_detect, t_done - t_agreed, t_done - t_detect};
    report_shrink(old, next, times, rebuilt, undone, position, rec, progress);
    return next.step;
  }
}

// Rank 0: whether a joiner answers on the ranks' network, without stalling the world on a cut-off one. The probe
// runs on a thread of its own; an answer within a few milliseconds (a reachable peer) is taken at once, a later one
// at a later check (nothing until then).
std::optional<bool> Trainer::Impl::reached(const JoinRequest& j) {
  Shrink& S = *shrink;
  auto it = S.probes.find(j.nonce);
  if (it == S.probes.end())
    it = S.probes.emplace(j.nonce, std::async(std::launch::async, S.reach.reaches, j.address)).first;
  if (it->second.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) return std::nullopt;
  const bool ok = it->second.get();
  S.probes.erase(it);  // reachable or not, the next check probes afresh
  return ok;
}

void Trainer::Impl::launch_look(int64_t step, RunRecorder& rec, Progress& progress) {
  Shrink& S = *shrink;
  S.look_flags.assign(size_t(S.start_world), 0.f);
  S.looked.clear();
  if (rank0()) {
    for (auto& j : pending_joins(*S.store, "shrink", S.world, S.start_world)) {
      // A joiner of another configuration or profile would be refused only once the world had grown around it (or
      // would train something else): it is refused here, and the world goes on as it is.
      if (const std::string diff = join_fingerprint_diff(S.fingerprint, j.fingerprint); !diff.empty()) {
        const std::string why = "not the live world's configuration: " + diff;
        refuse_join(*S.store, "shrink", j, why);
        if (auto* w = rec.metrics()) w->append_event(step, "rejoin-refused", "rank " + std::to_string(j.id) + ": " + why);
        progress.message("rejoin: refused rank " + std::to_string(j.id) + ": " + why);
        continue;
      }
      // A joiner this rank cannot reach on the ranks' network (a partition) would only fail the new world's
      // connect, stalling every member: it waits for a later check, as does one whose probe has not answered yet.
      if (S.reach.reaches && !j.address.empty()) {
        const std::optional<bool> ok = reached(j);
        if (ok != true) {
          if (ok == false && S.unreached.insert(j.nonce).second)
            progress.message("rejoin: rank " + std::to_string(j.id) + " asks to join but is not reachable on the "
                             "ranks' network; it is looked at again at the next check");
          continue;
        }
      }
      S.looked.push_back(j);
      S.look_flags[size_t(j.id)] = 1;
    }
  }
  S.look = backend->broadcast(S.look_flags.data(), S.look_flags.size(), 0);
}

bool Trainer::Impl::grow_world(int64_t step, RunRecorder& rec, Progress& progress) {
  Shrink& S = *shrink;
  // Rank 0 looks at a check step; every rank learns the answer from one small broadcast, launched there in the
  // same place of the op order and waited for at the next step, so that its latency hides behind a step's compute.
  std::vector<int> joiners;
  if (S.look) {
    S.look->wait();
    S.look = nullptr;
    for (size_t id = 0; id < S.look_flags.size(); ++id)
      if (S.look_flags[id] != 0) joiners.push_back(int(id));
  }
  if (joiners.empty()) {
    if (S.join_check.due(step)) launch_look(step, rec, progress);
    return false;
  }
  const std::vector<JoinRequest> joins = std::move(S.looked);
  const double t0 = now_s();
  // One average of every layer that is not in lock-step (delayed averages merged first), as at the end of a run:
  // the old members then hold bitwise equal parameters, which the joiners receive. The engine goes, and with it
  // its open state; the new world's engine starts afresh at this step (as after a shrink).
  engine->control.finalize();
  engine.reset();
  const Membership old = S.world;
  Membership next = old;
  next.generation = old.generation + 1;
  next.step = step;
  next.members.insert(next.members.end(), joiners.begin(), joiners.end());
  if (rank0())
    for (const auto& j : joins) answer_join(*S.store, "shrink", j, next);
  S.world = next;  // from here a lost member is a loss in the new world
  unwatch_world();
  const int new_rank = int(std::find(next.members.begin(), next.members.end(), S.start_rank) - next.members.begin());
  const int new_world = int(next.members.size());
  const int64_t position = sharder->position_of(step);
  try {
    backend = nullptr;
    S.owner->reset();
    *S.owner = S.make(new_rank, new_world, "dd-g" + std::to_string(next.generation));
    backend = S.owner->get();
    cfg.rank = new_rank;
    cfg.world = new_world;
    admit(/*joiner=*/false, rec);
    watch_world();
  } catch (const PeerLost&) {
    // A peer lost before the joiners hold the state (a joiner, or a member: the donor too): the joiners go (they
    // have nothing to go on with), so the members agree among themselves, as the old world one generation on. The
    // quorum is of the old members (a joiner that never reports does not hold the decision back), and a member that
    // finished the transfer before the loss and agrees as the grown world reads the same decision (same key prefix).
    S.world.members = old.members;
    S.dropped_joiners = joiners;
    throw;
  }
  report_rejoin(old, next, joiners, t0, position, rec, progress);
  return true;
}

void Trainer::Impl::end_elastic() {
  if (!shrink) return;
  unwatch_world();  // ranks that finished go: they are not silent members
  // The run's last look for joiners: nobody is admitted any more (a waiting joiner gives up at the mark below).
  if (shrink->look) {
    try {
      shrink->look->wait();
    } catch (const PeerLost&) {
      // a peer lost after the last step: the outputs are complete (the final barrier says so)
    }
    shrink->look = nullptr;
  }
  mark_run_done(*shrink->store, "shrink");
}

}  // namespace dd::train
