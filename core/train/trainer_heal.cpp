// Healing a joiner from a live member (docs/elastic.md "Rejoin"): every member of a grown world takes rank 0's place
// in the run, the joiner its state (parameters, optimizer state, buffers) layer by layer in bounded messages from
// rank 0; then a fresh engine and a hash check.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <sstream>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "core/train/state_hash.h"
#include "core/train/trainer_impl.h"

namespace dd::train {

// DREAMDDP_HEAL_CHUNK_BYTES: the largest message of a rejoin's transfer (default 4 MiB; a multiple of 4, >= 4).
int64_t heal_chunk_bytes() {
  const char* env = std::getenv("DREAMDDP_HEAL_CHUNK_BYTES");
  if (!env || !*env) return int64_t(4) << 20;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 4 || v % 4 != 0)
    throw UsageError(std::string("DREAMDDP_HEAL_CHUNK_BYTES='") + env + "': expected a byte count, a multiple of 4, >= 4");
  return v;
}

// A testing hook for fault tests (as DREAMDDP_PAUSE_AFTER_STEPS, pause_points.h): DREAMDDP_PAUSE_IN_HEAL=N makes a
// joiner stop itself (SIGSTOP) once it has received the N-th message of its state.
int64_t heal_pause_after() {
  const char* env = std::getenv("DREAMDDP_PAUSE_IN_HEAL");
  if (!env || !*env) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 1) throw UsageError(std::string("DREAMDDP_PAUSE_IN_HEAL='") + env + "': expected an integer >= 1");
  return v;
}

namespace {

// `path`: the floats of `parts` one after the other, then the step counts (a test compares what the donor sent
// with what the joiner received, DREAMDDP_HEAL_DUMP).
void dump_state(const std::string& path, const std::vector<const std::vector<float>*>& parts,
                const std::vector<int64_t>& steps) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("DREAMDDP_HEAL_DUMP: cannot write " + path);
  for (const auto* p : parts) std::fwrite(p->data(), sizeof(float), p->size(), f);
  std::fwrite(steps.data(), sizeof(int64_t), steps.size(), f);
  std::fclose(f);
}

}  // namespace

int64_t Trainer::Impl::admit(bool joiner, RunRecorder& rec) {
  // Rank 0's place in the run: the step, the data position, the sizes of what follows and the largest message of
  // the transfer (rank 0's DREAMDDP_HEAL_CHUNK_BYTES: every rank must cut the state alike).
  const std::string sizes = std::to_string(model->params().size()) + "," + std::to_string(model->buffers().size()) +
                            "," + std::to_string(opt->state().size());
  std::string mine;
  if (rank0())
    mine = std::to_string(shrink->world.step) + ";" + std::to_string(sharder->position_of(shrink->world.step)) + ";" +
           std::to_string(heal_chunk_bytes()) + ";" + sizes;
  const std::string root = backend->allgather(mine)[0];
  std::istringstream in(root);
  std::string step_s, pos_s, chunk_s, sizes_s;
  std::getline(in, step_s, ';');
  std::getline(in, pos_s, ';');
  std::getline(in, chunk_s, ';');
  std::getline(in, sizes_s);
  const int64_t step = std::stoll(step_s), position = std::stoll(pos_s);
  // Every rank runs the same configuration (the start-up handshake); a joiner started with another model is
  // refused here, before any state moves.
  if (sizes_s != sizes)
    throw UsageError("rejoin: the live world's parameters, buffers and optimizer state have sizes " + sizes_s +
                     ", this rank's " + sizes + " (not the same --model or --optimizer?)");
  // The optimizer's per-layer step counts: the joiner takes rank 0's, the others keep their own.
  share_layer_steps("rejoin", joiner);
  // The joiner takes rank 0's parameters, buffers and optimizer state (the old members' parameters and buffers are
  // bitwise equal to rank 0's already; their optimizer state stays their own). Layer by layer, in bounded messages.
  transfer_state(joiner, std::stoll(chunk_s));
  auto moved = std::make_unique<data::Sharder>(train.size, cfg.seed, cfg.world, cfg.rank, cfg.batch);
  moved->continue_at(step, position);
  sharder = std::move(moved);
  // The profile: a joiner carries none, so every rank takes rank 0's (the old members' are equal to it) and the
  // grown world scales it instead of profiling again; none there (a loss during the profiling steps): it profiles.
  const sync::ProfileCarry carried =
      sync::ProfileCarry::decode(backend->allgather(rank0() ? profile_carry->encode() : std::string())[0]);
  engine = make_engine_for(cfg, *model, *opt, *backend, rec.metrics(), *dev, step, profile_carry,
                           carried.has() ? &carried : nullptr, undo(), /*state_equal=*/true);
  // Every rank compares: parameters and buffers equal everywhere, the joiner's optimizer state equal to rank 0's.
  const std::string h = crc_hex(state_crc(model->params())) + "," + crc_hex(state_crc(model->buffers())) + "," +
                        crc_hex(state_crc(opt->state())) + (joiner ? ",j" : "");
  const auto all = backend->allgather(h);
  for (size_t r = 0; r < all.size(); ++r) {
    const bool j = all[r].size() > 2 && all[r].substr(all[r].size() - 2) == ",j";
    const size_t cmp = j ? all[r].size() - 2 : 17;  // a joiner: all three hashes; a member: parameters and buffers
    if (all[r].compare(0, cmp, all[0], 0, cmp) != 0)
      throw std::runtime_error("rejoin: rank " + std::to_string(r) + "'s state differs from rank 0's after the "
                               "transfer (hashes " + all[r] + " vs " + all[0] + ")");
  }
  return step;
}

void Trainer::Impl::transfer_state(bool joiner, int64_t chunk_bytes) {
  const double t0 = now_s();
  const size_t chunk = size_t(chunk_bytes / int64_t(sizeof(float)));
  const int64_t pause_after = joiner ? heal_pause_after() : 0;
  heal = {};
  heal.chunk_bytes = chunk_bytes;
  // The old members hold rank 0's parameters and buffers already (the grown world's closing average made them
  // equal; the hash check after the transfer says so), so the state goes from rank 0 to the joiners alone: over a
  // group of those ranks split from the world where others would otherwise receive it too. Rank 0 keeps rank 0 in
  // the group (ranks keep their order).
  std::unique_ptr<Backend> group;
  Backend* via = backend;
  if (backend->size() > 2) {
    group = backend->split(rank0() || joiner ? 0 : 1);
    via = group.get();
  }
  if (!rank0() && !joiner) return;
  // Host copies: rank 0 sends from them; a joiner receives into them and takes them only at the end, so that a peer
  // lost in the middle leaves nothing half taken.
  std::vector<float> params = ops::to_host(model->params()), buffers = ops::to_host(model->buffers()),
                     state = ops::to_host(opt->state());
  const size_t P = params.size();
  const size_t slots = P ? state.size() / P : 0;
  // Up to kInFlight messages are launched ahead of the one waited for, so that a small message's round trip is not
  // paid once per message; they run in order on the backend.
  constexpr size_t kInFlight = 16;
  std::deque<std::pair<WorkPtr, size_t>> flight;
  auto complete_one = [&] {
    flight.front().first->wait();
    heal.bytes += int64_t(flight.front().second * sizeof(float));
    flight.pop_front();
    if (++heal.messages == pause_after) std::raise(SIGSTOP);
  };
  auto send = [&](float* p, size_t n) {
    for (size_t i = 0; i < n; i += chunk) {
      const size_t m = std::min(chunk, n - i);
      flight.emplace_back(via->broadcast(p + i, m, 0), m);
      if (flight.size() >= kInFlight) complete_one();
    }
  };
  try {
    for (int l = 0; l < model->num_layers(); ++l) {
      const optim::LayerSlice s = model->layer_slice(l);
      send(params.data() + s.offset, size_t(s.count));
      for (size_t k = 0; k < slots; ++k) send(state.data() + k * P + size_t(s.offset), size_t(s.count));
    }
    send(buffers.data(), buffers.size());
    while (!flight.empty()) complete_one();
  } catch (...) {
    // A peer lost: the messages still queued end (each fails at once) before the buffers they write go.
    for (auto& f : flight) {
      try {
        f.first->wait();
      } catch (...) {
      }
    }
    throw;
  }
  if (joiner) {
    ops::from_host(model->params(), params.data(), params.size());
    ops::from_host(model->buffers(), buffers.data(), buffers.size());
    ops::from_host(opt->state(), state.data(), state.size());
  }
  heal.seconds = now_s() - t0;
  if (const char* dump = std::getenv("DREAMDDP_HEAL_DUMP"); dump && *dump)
    dump_state(std::string(dump) + (joiner ? ".received." : ".sent.") + std::to_string(shrink->start_rank),
               {&params, &buffers, &state}, opt->layer_steps());
}

int Trainer::Impl::lockstep_state_from_rank0(std::vector<float>& state) {
  const int L = model->num_layers();
  std::string mine(size_t(L), '1');
  if (shrink->lockstep.size() == size_t(L))
    for (int l = 0; l < L; ++l) mine[size_t(l)] = shrink->lockstep[size_t(l)] ? '1' : '0';
  const std::vector<std::string> all = backend->allgather(mine);
  const size_t P = model->params().size();
  const size_t slots = P ? state.size() / P : 0;
  std::vector<optim::LayerSlice> chosen;
  for (int l = 0; l < L; ++l)
    if (std::any_of(all.begin(), all.end(), [&](const std::string& x) { return x.size() != size_t(L) || x[size_t(l)] == '1'; }))
      chosen.push_back(model->layer_slice(l));
  std::vector<float> packed;
  for (size_t k = 0; k < slots; ++k)
    for (const auto& s : chosen)
      packed.insert(packed.end(), state.begin() + ptrdiff_t(k * P + size_t(s.offset)),
                    state.begin() + ptrdiff_t(k * P + size_t(s.offset + s.count)));
  if (packed.empty()) return int(chosen.size());
  backend->broadcast(packed.data(), packed.size(), 0)->wait();
  size_t at = 0;
  for (size_t k = 0; k < slots; ++k)
    for (const auto& s : chosen) {
      std::copy(packed.begin() + ptrdiff_t(at), packed.begin() + ptrdiff_t(at + size_t(s.count)),
                state.begin() + ptrdiff_t(k * P + size_t(s.offset)));
      at += size_t(s.count);
    }
  return int(chosen.size());
}

}  // namespace dd::train
