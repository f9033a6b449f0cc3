// run_rank: one simulated rank (sim_rank.h) — the engine unchanged, its surroundings simulated.
#include "app/sim/sim_rank.h"

#include <sys/mman.h>

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

#include "base/clock.h"
#include "core/sync/policy/registry.h"
#include "core/sync/policy/timed_window.h"
#include "core/train/step.h"

namespace sg4 = simgrid::s4u;

namespace dd::sim {
namespace {


// The compute of a step as the profile times it: the forward, each layer's backward followed by the engine's hook
// (as a model's backward calls it), each layer's share of the update. While the rank's collectives are in flight
// it runs 1 + contention.compute times slower (the profile's overlap.json), for as long as they are in flight
// only: a vote that ends early in a forward slows only the forward's first part.
class ProfileCompute final : public train::StepCompute {
 public:
  ProfileCompute(SimRun& run, int rank) : run_(run), L_(*run.layers), o_(*run.o), rank_(rank) {
    auto f = run.slow.find(rank);
    slow_ = f == run.slow.end() ? 1.0 : f->second;
  }
  models::ForwardResult forward() override {
    compute(o_.forward_s);
    return {};
  }
  void backward(nn::BackwardHook* hook) override {
    for (int l = L_.size() - 1; l >= 0; --l) {
      compute(L_.bp_s[size_t(l)]);
      if (hook) hook->on_layer_ready(l);
    }
  }
  void update_layer(int, float) override { compute(o_.update_s / L_.size()); }
  int num_layers() const override { return L_.size(); }

 private:
  void compute(double seconds) {
    if (!(seconds > 0)) return;
    auto& net = run_.net;
    const double start = sg4::Engine::get_clock();
    net.computing_since[size_t(rank_)] = start;
    slowed_compute(seconds);
    net.computed_s[size_t(rank_)] += sg4::Engine::get_clock() - start;
    net.computing_since[size_t(rank_)] = -1;
  }
  void slowed_compute(double seconds) {
    double flops = seconds * slow_ * kRefSpeed;
    const double k = 1 + L_.contention.compute;
    if (run_.net.cpu) return compute_on_shared_cores(run_.net, rank_, flops, k);
    if (k > 1 && run_.net.comm_busy[size_t(rank_)] > 0) {
      // Slowed while collectives run: this rank's compute actor is its host's only executor, so the slowed
      // part takes flops x k / speed; once they are done, what is left runs at full speed. (New collectives
      // are this actor's own, posted between compute calls, so none starts in here.)
      const double speed = sg4::this_actor::get_host()->get_speed(), t0 = sg4::Engine::get_clock();
      const double end = t0 + flops * k / speed;
      wait_comm_idle(run_.net, rank_, end);
      flops -= (sg4::Engine::get_clock() - t0) * speed / k;
      if (flops <= 1e-9 * seconds * kRefSpeed) return;
    }
    sg4::this_actor::execute(flops);
  }
  SimRun& run_;
  const SimLayers& L_;
  const SimOptions& o_;
  int rank_;
  double slow_ = 1;
};

// Collectives go to the backend as on the host, and move no data: averages on copies take none, snapshots are not
// taken (nothing reads them), scratch buffers are one shared region (the self-profile's timed collectives).
class SizesDataPath final : public sync::DataPath {
 public:
  explicit SizesDataPath(float* scratch) : scratch_(scratch) {}
  bool host_memory() const override { return true; }
  bool moves_data() const override { return false; }
  WorkPtr allreduce(Backend& g, float* p, size_t n, ReduceOp op, int) override { return g.allreduce(p, n, op); }
  WorkPtr broadcast(Backend& g, float* p, size_t n, int root) override { return g.broadcast(p, n, root); }
  WorkPtr allreduce_host(Backend& g, float* p, size_t n, ReduceOp op) override { return g.allreduce(p, n, op); }
  void broadcast_host(Backend& g, float* p, size_t n, int root) override { g.broadcast(p, n, root)->wait(); }
  void save(const float*, size_t, std::vector<float>&) override {}
  void restore(float*, size_t, const std::vector<float>&) override {}
  float* scratch(size_t n) override {
    if (n > size_t(kScratchFloats)) throw std::logic_error("simulate: a scratch buffer larger than planned");
    return scratch_;
  }
  void wait_layer_ready(int) override {}

 private:
  float* scratch_;
};

class NoWatch final : public train::StepWatch {};

}  // namespace

sync::Arenas sizes_only_arenas(const SimLayers& layers, int opt_slots, SimNet& net, float** scratch) {
  sync::Arenas a;
  a.num_params = layers.num_params;
  a.num_buffers = layers.num_buffers;
  a.state_slots = std::max(1, opt_slots);
  const size_t floats =
      size_t(a.num_params) * size_t(2 + a.state_slots) + size_t(a.num_buffers) + size_t(kScratchFloats) + 16;
  void* p = mmap(nullptr, 4 * floats, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();  // never unmapped: it lives as long as the process's one simulation
  float* base = static_cast<float*>(p);
  a.params = base;
  a.grads = base + a.num_params;
  a.opt_state = a.grads + a.num_params;
  a.buffers = a.opt_state + a.num_params * a.state_slots;
  *scratch = a.buffers + a.num_buffers;
  net.sizes_lo = static_cast<const char*>(p);
  net.sizes_hi = net.sizes_lo + 4 * floats;
  return a;
}

void run_rank(SimRun& run, int rank) {
  const SimOptions& o = *run.o;
  const bool rank0 = rank == 0;
  auto b = SimBackend::world(run.net, rank);
  sync::EngineOptions eo;
  eo.policy = run.policy;
  eo.switches = run.switches;
  eo.bucket_cap_bytes = o.bucket_cap_bytes;
  eo.first_bucket_bytes = o.first_bucket_bytes;
  eo.average_optimizer_state = o.average_optimizer_state;
  eo.last_step = o.last_period_local ? o.steps - 1 : -1;
  eo.anomaly_votes = o.anomaly_votes;
  eo.control_file = o.control_file;  // every rank: it shapes the control vector; rank 0 reads the file
  eo.verbose = o.verbose;
  eo.metrics = rank0 || o.all_rank_events ? run.metrics : nullptr;
  eo.host_name = run.nodes[size_t(rank)];
  eo.contention_given = true;
  eo.contention = run.layers->contention;
  auto engine = sync::make_layer_sync(eo, run.table, run.arenas, std::make_unique<SizesDataPath>(run.scratch), *b);

  auto timing = sync::make_policy(eo.policy);
  timing->setup(run.table.meta, b->size());
  const sync::TimedWindow tw = sync::timed_window(*timing, 0, o.steps, o.last_period_local);
  const int64_t end = tw.end > tw.warm ? tw.end : o.steps;
  ProfileCompute compute(run, rank);
  NoWatch watch;
  const double t_start = now_s();
  double t_warm = t_start, t_end = 0, exposed_s = 0, step_s = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    if (step == tw.warm) t_warm = now_s();
    const double t0 = now_s();
    engine->step.begin(step);
    const train::StepResult r = train::train_step(compute, &engine->step, 1.0f, false, watch);
    const sync::StepCommStats& cs = r.comm;
    if (step + 1 == end) t_end = r.end_s;
    if (step >= tw.warm && step < end) exposed_s += cs.exposed_ms / 1e3, step_s += r.end_s - t0;
    if (rank0) {
      const double per_step = double(o.batch) * b->size();
      const double sps = step >= tw.warm && r.end_s > t_warm ? double(step + 1 - tw.warm) * per_step / (r.end_s - t_warm)
                                                              : double(step + 1) * per_step / (r.end_s - t_start);
      run.res->steps.push_back({step, r.end_s - t_start, NAN, 0, r.forward_ms, r.backward_ms, r.update_ms,
                                cs.exposed_ms, cs.bytes, o.batch > 0 ? sps : 0});
      if (*run.progress) (*run.progress)(step);
    }
  }
  engine->control.finalize();  // as train's last step: what is still delayed is merged, every local layer averaged once
  run.last_end = std::max(run.last_end, now_s());
  if (rank0) {
    const int64_t timed = end - tw.warm;
    run.res->timed_first = tw.warm;
    run.res->timed_end = end;
    run.res->step_ms = timed > 0 ? (t_end - t_warm) / double(timed) * 1e3 : 0;
    run.res->exposed_comm_fraction = step_s > 0 ? exposed_s / step_s : 0;
  }
  engine.reset();
  b.reset();
}

}  // namespace dd::sim
