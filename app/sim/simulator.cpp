// SimGrid implementation of simulate(): per rank one compute actor (the training loop and the engine's hook, with
// the real core/sync policy, step plan and bucket plan) and one communication actor (the backend's thread: runs
// the rank's collectives FIFO in launch order as ring transfers between ring neighbours).
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <tuple>
#include <memory>

#include "app/sim/simulator.h"
#include "core/common/error.h"
#include "core/sync/engine/step_plan.h"
#include "core/sync/policy/registry.h"

namespace sg4 = simgrid::s4u;

namespace dd::sim {
namespace {

// A nominal host computes kRefSpeed flop/s; a profile second is kRefSpeed flops, so a host of speed s runs it in
// kRefSpeed / s seconds (platform files: 1Gf is nominal); --slow R=F multiplies rank R's compute by F.
constexpr double kRefSpeed = 1e9;

struct Job {
  const std::vector<int>* members;  // the ring, in rank order
  int64_t bytes;
  int64_t seq;                      // index in the rank's collective sequence (the same on every rank)
};

// One communication channel of a rank: a FIFO of collectives run by its own actor (the backend's communication
// thread). Channel 0 carries everything; with a delay the control all-reduce gets channel 1, as LayerSync's
// control_ (a split of the group: its own context and thread) so it never queues behind averages across steps.
struct Channel {
  sg4::MutexPtr mu;
  sg4::ConditionVariablePtr cv;
  std::deque<int64_t> queue;  // job ids waiting for the communication actor
  std::vector<Job> jobs;
  std::vector<double> end;    // completion time per job id
  int64_t done = 0;           // jobs [0, done) are complete (FIFO)
  bool stop = false;
};

constexpr int kChannels = 2, kControlChannel = 1;

struct RankState {
  sg4::Host* host = nullptr;
  Channel ch[kChannels];
  std::map<std::pair<int, int>, sg4::Mailbox*> to;  // (ring neighbour, channel) -> mailbox
};

struct World {
  const SimLayers* L = nullptr;
  const SimOptions* o = nullptr;
  int n = 0;
  std::vector<RankState> ranks;
  std::vector<int> all;                     // 0..n-1
  std::vector<std::vector<int>> groups;     // hier sub-groups (members, rank order); empty: none
  std::vector<int> group_of;                // rank -> index into groups
  std::vector<std::string> hosts;           // rank -> node name (hier nodes=auto groups by it)
  SimResult* res = nullptr;
  const std::function<void(int64_t)>* progress = nullptr;
  const std::map<int, double>* slow = nullptr;  // rank -> compute factor
  int64_t flows = 0;
  double last_end = 0;
  sync::LayerTimes measured;  // the self-profile rank 0 measured (profiling policies), agreed by everyone
  // Fused collectives start when every member has launched them (as the ring's chained dependencies imply).
  std::map<std::tuple<const void*, int, int64_t>, std::pair<sg4::BarrierPtr, int>> arrivals;
  std::map<std::pair<int, int>, double> latency;  // route latency r -> s (probed)
};

sg4::Mailbox* mailbox(World& w, int from, int to, int ch) {
  auto& m = w.ranks[from].to;
  auto it = m.find({to, ch});
  if (it != m.end()) return it->second;
  auto* mb = sg4::Mailbox::by_name("r" + std::to_string(from) + ">r" + std::to_string(to) +
                                   (ch ? "/" + std::to_string(ch) : ""));
  m[{to, ch}] = mb;
  return mb;
}

// One all-reduce on rank r's side: ring reduce-scatter then all-gather, 2(n-1) steps; at each step the rank sends
// one chunk (bytes/n) to its successor and receives one from its predecessor, and goes on when both are done.
// "fused": the same bytes per ring edge, 2(n-1)/n * bytes, as one flow (fewer events, no per-step latency).
void run_allreduce(World& w, int r, const Job& j, int ch) {
  const auto& m = *j.members;
  const int n = int(m.size());
  if (n <= 1) return;
  const int pos = int(std::find(m.begin(), m.end(), r) - m.begin());
  const int next = m[(pos + 1) % n], prev = m[(pos + n - 1) % n];
  sg4::Mailbox* out = mailbox(w, r, next, ch);
  sg4::Mailbox* in = mailbox(w, prev, r, ch);
  static int token = 0;
  // auto: the exact ring up to 32 ranks per collective, fused beyond (2(n-1) x n transfers per collective would
  // make 64+ ranks minutes of simulation: README "Speed").
  const bool fused = w.o->collectives == "fused" || (w.o->collectives == "auto" && n > 32);
  if (fused) {  // no member's result before every member has launched: the ring's chained dependencies
    const auto key = std::make_tuple(static_cast<const void*>(&m), ch, j.seq);
    auto it = w.arrivals.find(key);
    if (it == w.arrivals.end()) it = w.arrivals.emplace(key, std::make_pair(sg4::Barrier::create(unsigned(n)), 0)).first;
    sg4::BarrierPtr b = it->second.first;
    if (++it->second.second == n) w.arrivals.erase(it);  // the last one in forgets it (the others hold `b`)
    b->wait();
  }
  const int steps = fused ? 1 : 2 * (n - 1);
  const double chunk = fused ? double(j.bytes) * 2.0 * (n - 1) / n : double(j.bytes) / n;
  for (int k = 0; k < steps; ++k) {
    auto s = out->put_async(&token, uint64_t(std::llround(chunk)));
    void* got = nullptr;
    auto g = in->get_async(&got);
    s->wait();
    g->wait();
  }
  // The ring pays the route latency at each of its 2(n-1) steps; the fused flow paid it once.
  if (fused) sg4::this_actor::sleep_for((2 * (n - 1) - 1) * w.latency[{r, next}]);
  w.flows += steps;
}

// Latency of the route r -> to under the network model (a 0-byte transfer), for fused collectives.
void probe_latency(World& w, int r, int to) {
  if (w.latency.count({r, to})) return;
  const double t0 = sg4::Engine::get_clock();
  sg4::Comm::sendto(w.ranks[size_t(r)].host, w.ranks[size_t(to)].host, 0);
  w.latency[{r, to}] = sg4::Engine::get_clock() - t0;
}

void comm_actor(World* w, int r, int ch) {
  Channel& R = w->ranks[r].ch[ch];
  if (ch == 0 && w->o->collectives != "ring") {  // the ring successors of this rank: in the world, in its hier group
    if (w->n > 1) probe_latency(*w, r, (r + 1) % w->n);
    if (!w->groups.empty()) {
      const auto& g = w->groups[size_t(w->group_of[size_t(r)])];
      const size_t pos = size_t(std::find(g.begin(), g.end(), r) - g.begin());
      if (g.size() > 1) probe_latency(*w, r, g[(pos + 1) % g.size()]);
    }
  }
  while (true) {
    int64_t id;
    {
      std::unique_lock<sg4::Mutex> lk(*R.mu);
      while (R.queue.empty() && !R.stop) R.cv->wait(lk);
      if (R.queue.empty()) return;
      id = R.queue.front();
      R.queue.pop_front();
    }
    const Job job = R.jobs[size_t(id)];  // a copy: the compute actor may grow R.jobs meanwhile
    run_allreduce(*w, r, job, ch);
    std::unique_lock<sg4::Mutex> lk(*R.mu);
    R.end[size_t(id)] = sg4::Engine::get_clock();
    R.done = id + 1;
    R.cv->notify_all();
  }
}

// The training loop and the sync engine of one rank (core/train/trainer.cpp + core/sync/engine/layer_sync.cpp), with
// compute replaced by the profile's times and the collectives by jobs for the communication actor.
class RankLoop {
 public:
  RankLoop(World& w, int r) : w_(w), r_(r), R_(w.ranks[size_t(r)]), L_(*w.L), o_(*w.o) {}

  void run() {
    const int nl = L_.size();
    policy_ = sync::make_policy(sync::PolicySpec::parse(o_.policy));
    policy_->setup(L_.meta, w_.n);
    ctl_ = policy_->merge_delay() > 0 ? kControlChannel : 0;  // LayerSync::set_policy: control_ with a delay
    actions_.assign(nl, sync::Action::None);
    lockstep_.assign(nl, true);
    stale_.assign(nl, 0);
    ready_.assign(nl, 0);
    signals_.grad_norm.assign(nl, 1);
    signals_.cos_prev.assign(nl, 1);
    signals_.stale.assign(nl, 0);
    policy_votes_ = size_t(nl) * size_t(policy_->caps().voting ? policy_->caps().voting->votes_per_layer() : 0);
    votes_.assign(policy_votes_ + (o_.anomaly_votes ? 1 : 0), 0.0f);
    // LayerSync: the anomaly flag alone is applied two steps late (its all-reduce hides behind a whole step).
    vote_lag_ = policy_votes_ == 0 ? 2 : 1;
    auto f = w_.slow->find(r_);
    slow_ = f == w_.slow->end() ? 1.0 : f->second;
    const double t_start = now();
    const int64_t warm = std::min<int64_t>(5, o_.steps / 10);
    double t_warm = t_start, exposed_total = 0, step_total = 0;
    for (int64_t step = 0; step < o_.steps; ++step) {
      step_ = step;
      if (step == warm) t_warm = now();
      const double t0 = now();
      t_bwd_ = t0;
      exposed_ms_ = 0;
      bytes_ = 0;
      apply_agreed_votes(false);
      merge_delayed(false);
      const bool lockstep_all = step < policy_->profile_window();
      auto entering = sync::decide_step(*policy_, step, lockstep_all, actions_, lockstep_, stale_);
      if (std::find(entering.begin(), entering.end(), true) != entering.end()) {
        merge_delayed(true);
        average_layers(entering, /*optimizer_state=*/true, /*all_buffers=*/false, /*log=*/true);
      }
      buckets_ = sync::plan_buckets(actions_, L_.ranges, o_.first_bucket_bytes, o_.bucket_cap_bytes);
      trigger_ = sync::bucket_triggers(buckets_, nl);
      inflight_.clear();
      // delay=T: this step's averages are merged T steps later (LayerSync::plan_launches / launch_delayed).
      delayed_now_.assign(size_t(nl), false);
      if (policy_->merge_delay() > 0)
        for (auto& bk : buckets_)
          if (sync::averages_params(bk.action))
            for (int l = bk.lo; l <= bk.hi; ++l) delayed_now_[size_t(l)] = true;
      const double t1 = now();
      compute(o_.forward_s);
      const double t2 = now();
      t_bwd_ = t2;
      for (int l = nl - 1; l >= 0; --l) {
        compute(L_.bp_s[size_t(l)]);
        ready_[size_t(l)] = now();
        if (trigger_[size_t(l)] >= 0) launch(buckets_[size_t(trigger_[size_t(l)])]);
      }
      const double t3 = now();
      if (!inflight_.empty()) wait_for(inflight_.back().last);
      const double t4 = now();
      exposed_ms_ += (t4 - t3) * 1e3;
      record_timeline(t4);
      compute(o_.update_s);
      const double t_upd = now();
      after_update();
      const double t5 = now();
      const double step_s = t5 - t0;
      if (step >= warm) {
        exposed_total += exposed_ms_ / 1e3;
        step_total += step_s;
      }
      if (r_ == 0) {
        const double elapsed = t5 - t_start;
        const double per_rank = double(o_.batch) * w_.n;
        const double sps = step >= warm && t5 > t_warm ? double(step + 1 - warm) * per_rank / (t5 - t_warm)
                                                       : double(step + 1) * per_rank / elapsed;
        telemetry::StepRow row{step, elapsed, NAN, 0, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t_upd - t4) * 1e3,
                               exposed_ms_, bytes_, o_.batch > 0 ? sps : 0};
        w_.res->steps.push_back(row);
        if (*w_.progress) (*w_.progress)(step);
      }
    }
    for (auto& c : controls_) wait_for(c.second, ctl_);
    controls_.clear();
    for (auto& d : delayed_) {  // LayerSync::finalize merges (and logs) what is still delayed
      wait_for(d.f.last);
      log_event(d.f, d.step, d.t_bwd);
    }
    w_.last_end = std::max(w_.last_end, now());
    if (r_ == 0) {
      w_.res->plan = policy_->caps().reporting ? policy_->caps().reporting->plan() : std::string();
      const int64_t timed = o_.steps - warm;
      w_.res->step_ms = timed > 0 ? (now() - t_warm) / double(timed) * 1e3 : 0;
      w_.res->exposed_comm_fraction = step_total > 0 ? exposed_total / step_total : 0;
    }
    w_.res->collectives_per_rank[size_t(r_)] = int64_t(R_.ch[0].jobs.size() + R_.ch[kControlChannel].jobs.size());
    for (auto& c : R_.ch) {
      std::unique_lock<sg4::Mutex> lk(*c.mu);
      c.stop = true;
      c.cv->notify_all();
    }
  }

 private:
  struct InFlight {
    sync::Bucket bucket;
    int64_t first, last;  // job ids
    double launch;
  };
  struct Delayed {
    InFlight f;
    int64_t step, merge_step;
    double t_bwd;
  };

  static double now() { return sg4::Engine::get_clock(); }

  void compute(double seconds) {
    if (seconds > 0) sg4::this_actor::execute(seconds * slow_ * kRefSpeed);
  }

  int64_t push(const std::vector<int>* members, int64_t bytes, int ch = 0) {
    Channel& c = R_.ch[ch];
    std::unique_lock<sg4::Mutex> lk(*c.mu);
    const int64_t id = int64_t(c.jobs.size());
    c.jobs.push_back({members, bytes, id});
    c.end.push_back(0);
    c.queue.push_back(id);
    c.cv->notify_all();
    return id;
  }

  void wait_for(int64_t id, int ch = 0) {
    Channel& c = R_.ch[ch];
    std::unique_lock<sg4::Mutex> lk(*c.mu);
    while (c.done <= id) c.cv->wait(lk);
  }

  const std::vector<int>* members(sync::Action a) const {
    if (a == sync::Action::AverageGroup && !w_.groups.empty()) return &w_.groups[size_t(w_.group_of[size_t(r_)])];
    return &w_.all;
  }

  // One collective counted like LayerSync::allreduce (bytes of this rank's payload).
  int64_t collective(const std::vector<int>* m, int64_t floats) {
    bytes_ += 4 * floats;
    return push(m, 4 * floats);
  }

  // One bucket's collectives (bucket_parts: parameters, buffers when asked, optimizer state slots), launched now.
  InFlight send(const sync::Bucket& bk, const std::vector<int>* m, bool with_buffers, int opt_slots) {
    InFlight f{bk, -1, -1, now()};
    for (auto& part : sync::bucket_parts(bk, with_buffers, opt_slots, L_.num_params)) {
      const int64_t id = collective(m, part.n);
      if (f.first < 0) f.first = id;
      f.last = id;
    }
    return f;
  }

  int opt_slots() const { return o_.average_optimizer_state ? o_.opt_slots : 0; }

  void launch(const sync::Bucket& bk) {
    const bool delayed = delayed_now_[size_t(bk.lo)];
    const InFlight f = send(bk, members(bk.action), true, opt_slots());
    if (delayed) delayed_.push_back({f, step_, step_ + policy_->merge_delay(), t_bwd_});
    else inflight_.push_back(f);
  }

  // LayerSync::periodic_average with a delay (localsgd:k=K,delay=T): the whole model's average launched after this
  // step's update, on copies (parameters and buffers of every local layer, optimizer state when asked), not waited
  // for; merged at the start of step + T by merge_delayed.
  void launch_all_delayed() {
    for (auto& bk : sync::plan_average(local_layers(), L_.ranges, o_.bucket_cap_bytes))
      delayed_.push_back({send(bk, &w_.all, true, opt_slots()), step_, step_ + policy_->merge_delay(), t_bwd_});
  }

  // LayerSync::merge_delayed: waits for the delayed averages due by this step (all when `all`), oldest first.
  void merge_delayed(bool all) {
    while (!delayed_.empty() && (all || delayed_.front().merge_step <= step_)) {
      Delayed d = delayed_.front();
      delayed_.pop_front();
      const double t0 = now();
      wait_for(d.f.last);
      exposed_ms_ += (now() - t0) * 1e3;
      log_event(d.f, d.step, d.t_bwd);
    }
  }

  // LayerSync::average_layers: blocking average of the chosen layers (and optionally optimizer state).
  void average_layers(const std::vector<bool>& which, bool optimizer_state, bool all_buffers, bool log) {
    std::vector<InFlight> sent;
    for (auto& bk : sync::plan_average(which, L_.ranges, o_.bucket_cap_bytes))
      sent.push_back(send(bk, &w_.all, !all_buffers, optimizer_state ? o_.opt_slots : 0));
    int64_t last = sent.empty() ? -1 : sent.back().last;
    if (all_buffers && L_.num_buffers) last = collective(&w_.all, L_.num_buffers);
    if (last >= 0) wait_for(last);
    if (log)
      for (auto& f : sent) log_event(f, step_, t_bwd_);
  }

  // LayerSync::local_layers: the layers out of lock-step (the ones a whole-model average covers).
  std::vector<bool> local_layers() const {
    std::vector<bool> local(lockstep_.size());
    for (size_t l = 0; l < local.size(); ++l) local[l] = !lockstep_[l];
    return local;
  }

  void average_all(bool count_stats, bool log) {
    const int64_t b0 = bytes_;
    average_layers(local_layers(), o_.average_optimizer_state, /*all_buffers=*/true, log);
    if (!count_stats) bytes_ = b0;
  }

  // LayerSync::apply_agreed_votes: every control vector cast at least vote_lag_ steps ago, oldest first.
  void apply_agreed_votes(bool all) {
    while (!controls_.empty() && (all || controls_.front().first <= step_ - vote_lag_)) {
      const auto c = controls_.front();
      controls_.pop_front();
      const double t0 = now();
      wait_for(c.second, ctl_);
      exposed_ms_ += (now() - t0) * 1e3;
      if (policy_votes_) {
        // Every rank cast the same votes (identical constant signals): the sum over ranks is world x votes.
        std::vector<float> sums(votes_.begin(), votes_.begin() + long(policy_votes_));
        for (auto& v : sums) v *= float(w_.n);
        policy_->caps().voting->on_agreed(c.first, sums.data(), w_.n);
      }
    }
  }

  void after_update() {
    if (!votes_.empty()) {  // LayerSync::cast_votes: the control all-reduce, waited for at the next step
      if (policy_votes_) {
        for (size_t l = 0; l < stale_.size(); ++l) signals_.stale[l] = stale_[l];
        policy_->caps().voting->cast_votes(step_, signals_, votes_.data());
      }
      controls_.push_back({step_, push(&w_.all, int64_t(4 * votes_.size()), ctl_)});
    }
    if (policy_->full_average_after(step_)) {
      const double t0 = now();
      if (policy_->merge_delay() > 0) launch_all_delayed();
      else average_all(true, true);
      exposed_ms_ += (now() - t0) * 1e3;
      std::fill(stale_.begin(), stale_.end(), 0);
    }
    if (policy_->profile_window() > 0 && step_ + 1 == policy_->profile_window()) finish_profile();
  }

  // LayerSync::finish_profile + measure_comm_model, in simulated time: backward per layer as the hook measured it
  // (the profile's times x the ranks' mean compute factor), comm per layer alpha + bytes x per_byte from timed
  // all-reduces of 256 and 1 Mi floats (4 each, median of the last 3), exactly the engine's estimate; then the
  // agreement (2L floats averaged, then broadcast: rank 0's numbers for everyone) and the policy's schedule.
  void finish_profile() {
    auto timed = [&](int64_t n) {
      std::vector<double> ts;
      for (int i = 0; i < 4; ++i) {
        const double t0 = now();
        wait_for(push(&w_.all, 4 * n));
        ts.push_back(now() - t0);
      }
      std::sort(ts.begin() + 1, ts.end());
      return ts[2];
    };
    const int64_t small = 256, large = 1 << 20;
    const double ts = timed(small), tl = timed(large);
    if (r_ == 0) {
      const double per_byte = std::max(0.0, (tl - ts) / double(4 * (large - small)));
      const double alpha = std::max(0.0, ts - per_byte * 4 * small);
      double mean_slow = 0;
      for (int r = 0; r < w_.n; ++r) {
        auto f = w_.slow->find(r);
        mean_slow += (f == w_.slow->end() ? 1.0 : f->second) / w_.n;
      }
      w_.measured.backward_s.clear();
      w_.measured.comm_s.clear();
      for (int l = 0; l < L_.size(); ++l) {
        w_.measured.backward_s.push_back(L_.bp_s[size_t(l)] * mean_slow);
        w_.measured.comm_s.push_back(alpha + per_byte * double(L_.meta[size_t(l)].bytes));
      }
    }
    push(&w_.all, 8 * int64_t(L_.size()));
    wait_for(push(&w_.all, 8 * int64_t(L_.size())));  // rank 0 has stored its numbers before it took part
    policy_->caps().profiled->on_profile(w_.measured);
  }

  bool logs() const { return r_ == 0 || o_.all_rank_events; }

  void record_timeline(double) {
    if (!logs()) return;
    if (step_ % 10 == 0)
      for (int l = L_.size() - 1; l >= 0; --l)
        w_.res->ready.push_back({step_, int32_t(r_), int32_t(l), ready_[size_t(l)] - t_bwd_});
    for (auto& f : inflight_) log_event(f, step_, t_bwd_);
  }

  void log_event(const InFlight& f, int64_t step, double t_bwd) {
    if (!logs()) return;
    double end = 0;
    {
      std::unique_lock<sg4::Mutex> lk(*R_.ch[0].mu);
      for (int64_t id = f.first; id <= f.last; ++id) end = std::max(end, R_.ch[0].end[size_t(id)]);
    }
    telemetry::SyncEventRow e;
    e.step = step;
    e.first_layer = f.bucket.lo;
    e.last_layer = f.bucket.hi;
    e.action = f.bucket.action == sync::Action::AllreduceGrads ? telemetry::SyncAction::kAllreduceGrads
                                                               : telemetry::SyncAction::kAverageParams;
    e.group = f.bucket.action == sync::Action::AverageGroup && !w_.groups.empty() ? 1 + w_.group_of[size_t(r_)] : 0;
    e.rank = r_;
    e.bytes = f.bucket.bytes();
    e.launch_s = f.launch - t_bwd;
    e.end_s = end - t_bwd;
    w_.res->events.push_back(e);
  }

  World& w_;
  int r_;
  RankState& R_;
  const SimLayers& L_;
  const SimOptions& o_;
  std::unique_ptr<sync::Policy> policy_;
  std::vector<sync::Action> actions_;
  std::vector<bool> lockstep_;
  std::vector<int64_t> stale_;
  std::vector<double> ready_;
  std::vector<sync::Bucket> buckets_;
  std::vector<int> trigger_;
  std::vector<InFlight> inflight_;
  sync::LayerSignals signals_;
  std::vector<float> votes_;
  size_t policy_votes_ = 0;
  std::deque<std::pair<int64_t, int64_t>> controls_;  // (step cast, job id) of control all-reduces in flight
  int ctl_ = 0;  // the channel of the control all-reduces
  int vote_lag_ = 1;
  std::deque<Delayed> delayed_;
  std::vector<bool> delayed_now_;
  int64_t step_ = 0, bytes_ = 0;
  double t_bwd_ = 0, exposed_ms_ = 0, slow_ = 1;
};

void build_cluster(const PlatformSpec& p, std::vector<sg4::Host*>& hosts, std::vector<std::string>& nodes) {
  auto* root = sg4::create_star_zone("cluster");
  for (int i = 0; i < p.nodes; ++i) {
    const std::string node = "node" + std::to_string(i);
    auto* z = sg4::create_star_zone(node);
    z->set_parent(root);
    auto* gw = z->create_router(node + "-switch");
    for (int g = 0; g < p.per_node; ++g) {
      const int r = i * p.per_node + g;
      auto* h = z->create_host(node + "-rank" + std::to_string(r), kRefSpeed)->seal();
      auto* nic = z->create_split_duplex_link(node + "-rank" + std::to_string(r) + "-nic", p.intra_Bps)->seal();
      z->add_route(h->get_netpoint(), nullptr, nullptr, nullptr,
                   {sg4::LinkInRoute(nic, sg4::LinkInRoute::Direction::UP)}, true);
      hosts.push_back(h);
      nodes.push_back(node);
    }
    z->seal();
    auto* up = root->create_split_duplex_link(node + "-uplink", p.inter_Bps)->set_latency(p.lat_s / 2)->seal();
    root->add_route(z->get_netpoint(), nullptr, gw, nullptr, {sg4::LinkInRoute(up, sg4::LinkInRoute::Direction::UP)},
                    true);
  }
  root->seal();
}

}  // namespace

bool have_simgrid() { return true; }

// SimGrid maps every actor's stack with a guard page: about two memory mappings per actor (2048 ranks: 12766 in
// /proc/PID/maps), and the kernel's vm.max_map_count (65530 by default) caps them; past it SimGrid aborts the
// process ("Failed to protect stack") after minutes of set-up. Refuse such a world first, saying what to change.
void check_actor_budget(int ranks, const std::string& what) {
  std::ifstream f("/proc/sys/vm/max_map_count");
  long long limit = 0;
  if (!(f >> limit) || limit <= 0) return;  // not Linux, or not readable: SimGrid will say
  const int actors_per_rank = 1 + kChannels;
  const long long need = 2LL * actors_per_rank * ranks + 1024;
  if (need <= limit) return;
  throw UsageError(what + ": " + std::to_string(ranks) + " ranks run " + std::to_string(actors_per_rank) +
                   " SimGrid actors each, about " + std::to_string(need) + " memory mappings (a stack and its guard " +
                   "page per actor), above this system's vm.max_map_count = " + std::to_string(limit) +
                   ": simulate at most " + std::to_string((limit - 1024) / (2 * actors_per_rank)) +
                   " ranks, or raise it as root (sysctl -w vm.max_map_count=" + std::to_string(need + 4096) + ")");
}

SimResult simulate(const SimLayers& layers, const PlatformSpec& platform, const SimOptions& opt,
                   const std::function<void(int64_t)>& progress) {
  // Refuse what the simulation cannot run faithfully, before SimGrid starts.
  {
    auto p = sync::make_policy(sync::PolicySpec::parse(opt.policy));
    if (p->caps().voting && p->caps().voting->wants_signals() && !opt.constant_signals)
      throw UsageError("--policy " + opt.policy + ": decides from local gradient signals, which a simulation has "
                       "none of; add --signals constant (every layer cos = 1, norm = 1) or use ddp, localsgd, "
                       "plsgd, dreamddp, fixed, staleness");
    if (p->merge().transforms())
      throw UsageError("--policy " + opt.policy + ": the simulation models plain averages; outer= and compress= are "
                       "not simulated (for a codec's bytes, scale the layer sizes of --bytes)");
  }
  static bool started = false;
  if (started) throw std::logic_error("simulate: SimGrid runs once per process");
  started = true;
  const auto t_wall = std::chrono::steady_clock::now();
  int argc = 2;
  char name[] = "dreamddp-simulate";
  char quiet[] = "--log=root.thres:warning";  // SimGrid's INFO lines (configuration changes) are not ours to print
  char* argv[] = {name, quiet, nullptr};
  sg4::Engine e(&argc, argv);
  // The schedule solver runs inside the actors (self-profiling policies): 128 KiB stacks overflowed at 128 ranks.
  sg4::Engine::set_config("contexts/stack-size:4096");
  for (auto& c : opt.simgrid_cfg) {
    // SimGrid checks model names only when the platform is built, and then aborts the process: check them here.
    static const std::map<std::string, std::vector<std::string>> models = {
        {"network/model", {"LV08", "CM02", "Constant", "SMPI", "IB"}},
        {"cpu/model", {"Cas01"}},
        {"host/model", {"default", "compound"}}};
    const std::string key = c.substr(0, c.find(':')), val = c.substr(c.find(':') + 1);
    auto m = models.find(key);
    if (m != models.end() && std::find(m->second.begin(), m->second.end(), val) == m->second.end()) {
      std::string known;
      for (auto& k : m->second) known += (known.empty() ? "" : ", ") + k;
      throw UsageError("--cfg " + c + ": unknown " + key + " (known: " + known + ")");
    }
    try {
      sg4::Engine::set_config(c);
    } catch (const std::exception& ex) {
      throw UsageError("--cfg " + c + ": " + ex.what());
    }
  }
  std::vector<sg4::Host*> hosts;
  std::vector<std::string> nodes;
  if (!platform.file.empty()) {
    try {
      e.load_platform(platform.file);
    } catch (const std::exception& ex) {
      throw UsageError("--platform " + platform.file + ": " + ex.what());
    }
    hosts = e.get_all_hosts();
    check_actor_budget(int(hosts.size()), "--platform " + platform.file);
    std::sort(hosts.begin(), hosts.end(), [](auto* a, auto* b) { return a->get_name() < b->get_name(); });
    if (hosts.empty()) throw UsageError("--platform " + platform.file + ": no hosts");
    for (auto* h : hosts) nodes.push_back(h->get_englobing_zone()->get_name());
  } else {
    build_cluster(platform, hosts, nodes);
  }
  for (auto& [r, f] : platform.slow)
    if (r >= int(hosts.size()))
      throw UsageError("--slow " + std::to_string(r) + "=...: rank " + std::to_string(r) + " is not below the world size " +
                       std::to_string(hosts.size()));

  SimResult res;
  World w;
  w.L = &layers;
  w.o = &opt;
  w.n = int(hosts.size());
  w.res = &res;
  w.progress = &progress;
  w.slow = &platform.slow;
  w.hosts = nodes;
  w.ranks.resize(size_t(w.n));
  res.world = w.n;
  res.hosts = nodes;
  res.collectives_per_rank.assign(size_t(w.n), 0);
  for (int r = 0; r < w.n; ++r) w.all.push_back(r);
  {
    auto p = sync::make_policy(sync::PolicySpec::parse(opt.policy));
    p->setup(layers.meta, w.n);
    auto g = p->caps().grouped ? p->caps().grouped->groups(nodes) : std::vector<int>{};
    if (!g.empty()) {
      if (int(g.size()) != w.n) throw UsageError("--policy " + opt.policy + ": topology does not cover the ranks");
      int ng = *std::max_element(g.begin(), g.end()) + 1;
      w.groups.assign(size_t(ng), {});
      for (int r = 0; r < w.n; ++r) w.groups[size_t(g[size_t(r)])].push_back(r);
      w.group_of = g;
    }
  }
  std::vector<std::unique_ptr<RankLoop>> loops;
  for (int r = 0; r < w.n; ++r) {
    auto& R = w.ranks[size_t(r)];
    R.host = hosts[size_t(r)];
    for (auto& c : R.ch) {
      c.mu = sg4::Mutex::create();
      c.cv = sg4::ConditionVariable::create();
    }
    loops.push_back(std::make_unique<RankLoop>(w, r));
  }
  for (int r = 0; r < w.n; ++r) {
    RankLoop* loop = loops[size_t(r)].get();
    sg4::Actor::create("rank" + std::to_string(r), hosts[size_t(r)], [loop] { loop->run(); });
    for (int ch = 0; ch < kChannels; ++ch)
      sg4::Actor::create("comm" + std::to_string(r) + (ch ? "/" + std::to_string(ch) : ""), hosts[size_t(r)],
                         [&w, r, ch] { comm_actor(&w, r, ch); });
  }
  e.run();
  res.simulated_s = w.last_end;
  res.flows = w.flows;
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wall).count();
  return res;
}

}  // namespace dd::sim
