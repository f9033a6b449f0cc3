// SimBackend over SimGrid (sim_backend.h): a group is its members' ring; each member has one FIFO channel and one
// communication actor; collectives are ring transfers between ring neighbours.
#include "app/sim/sim_backend.h"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <map>

namespace sg4 = simgrid::s4u;

namespace dd::sim {

enum JobKind { kAllreduce = 0, kBroadcast = 1, kBytes = 2 };

struct Job {
  int kind = kAllreduce;
  int64_t bytes = 0;
  int64_t seq = 0;  // index in the group's collective sequence (the same on every member)
  std::function<void(ByteChannel&)> fn;
  float* data = nullptr;  // a small host vector whose result the ranks decide on (votes, an agreed profile)
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
};

// The result of a collective that moves data: every member's vector, combined once all have arrived.
struct DataJob {
  std::vector<float*> ptrs;
  int arrived = 0, copied = 0;
  bool done = false;
  std::vector<float> result;
};

// One member's FIFO: jobs [0, done) are complete; end[id] is when job id completed (simulated seconds).
struct Channel {
  sg4::MutexPtr mu = sg4::Mutex::create();
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
  std::deque<std::pair<int64_t, Job>> queue;
  std::vector<double> end;
  std::map<int64_t, std::exception_ptr> errors;
  int64_t done = 0;
  bool stop = false;
};


struct SimGroup {
  int id = 0;
  sg4::MutexPtr mu;  // data-moving collectives: members wait here for each other
  sg4::ConditionVariablePtr cv;
  std::map<int64_t, DataJob> data;
  std::vector<int> members;  // world ranks, in group rank order
  sg4::BarrierPtr barrier;
  std::vector<std::unique_ptr<Channel>> ch;  // by group rank
  std::vector<std::string> blobs;            // allgather
  std::vector<int> colors;                   // split
  std::map<std::pair<int64_t, int>, std::shared_ptr<SimGroup>> children;  // (split #, color)
  // Fused collectives start when every member has launched them (as the ring's chained dependencies imply).
  std::map<int64_t, std::pair<sg4::BarrierPtr, int>> arrivals;
  std::map<std::pair<int, int>, sg4::Mailbox*> boxes;  // (from, to) group ranks
  std::map<int, double> latency;                       // group rank -> route latency to its ring successor
};

namespace {

std::shared_ptr<SimGroup> make_group(SimNet& net, std::vector<int> members) {
  auto g = std::make_shared<SimGroup>();
  g->id = net.next_group++;
  g->members = std::move(members);
  const size_t n = g->members.size();
  g->barrier = sg4::Barrier::create(unsigned(n));
  g->mu = sg4::Mutex::create();
  g->cv = sg4::ConditionVariable::create();
  for (size_t i = 0; i < n; ++i) g->ch.push_back(std::make_unique<Channel>());
  g->blobs.resize(n);
  g->colors.resize(n);
  return g;
}

sg4::Mailbox* box(SimGroup& g, int from, int to) {
  auto it = g.boxes.find({from, to});
  if (it != g.boxes.end()) return it->second;
  auto* mb = sg4::Mailbox::by_name("g" + std::to_string(g.id) + ":" + std::to_string(from) + ">" + std::to_string(to));
  g.boxes[{from, to}] = mb;
  return mb;
}

bool fused(const SimNet& net, const SimGroup& g) {
  return net.collectives == "fused" || (net.collectives == "auto" && g.members.size() > 32);
}

// `steps` rounds of the ring on member `pos`'s side: send `chunk` bytes to the successor, receive from the
// predecessor, go on when both are done. Fused: one flow carrying the rounds' bytes, after every member launched
// it, plus the route latency the rounds would have paid.
void ring_rounds(SimNet& net, SimGroup& g, int pos, int steps, double chunk, int64_t seq, bool bulk) {
  const int n = int(g.members.size());
  if (n <= 1 || steps <= 0) return;
  const int next = (pos + 1) % n, prev = (pos + n - 1) % n;
  sg4::Mailbox* out = box(g, pos, next);
  sg4::Mailbox* in = box(g, prev, pos);
  static int token = 0;
  const bool f = fused(net, g);
  if (f) {
    auto it = g.arrivals.find(seq);
    if (it == g.arrivals.end()) it = g.arrivals.emplace(seq, std::make_pair(sg4::Barrier::create(unsigned(n)), 0)).first;
    sg4::BarrierPtr b = it->second.first;
    if (++it->second.second == n) g.arrivals.erase(it);  // the last one in forgets it (the others hold `b`)
    b->wait();
  }
  const int rounds = f ? 1 : steps;
  const double bytes = f ? chunk * steps : chunk;
  const int world = g.members[size_t(pos)];
  for (int k = 0; k < rounds; ++k) {
    auto s = out->put_async(&token, uint64_t(std::llround(bytes)));
    void* got = nullptr;
    auto r = in->get_async(&got);
    s->wait();
    r->wait();
    // The transfers ran from when both of them had started (before that this rank only waited for a neighbour).
    const double t0 = std::max(s->get_start_time(), r->get_start_time());
    if (f) sg4::this_actor::sleep_for((steps - 1) * g.latency[pos]);
    // The part of this round's transfers that overlapped the rank's own compute ran 1 + comm_slowdown times
    // slower: the round ends that much later (its neighbours wait for it, as a ring does).
    if (bulk && net.comm_slowdown > 0) {
      const double t1 = sg4::Engine::get_clock();
      const double overlap = net.computed_until(world, t1) - net.computed_until(world, t0);
      if (overlap > 0) sg4::this_actor::sleep_for(overlap * net.comm_slowdown);
    }
  }
  net.flows += rounds;
}

// The byte channel of run_bytes: each call is size-1 ring rounds of n bytes; `out` gets this rank's own block in
// every slot (a simulation moves no data), or nothing when the engine passes no blocks (its sizes-only path).
class SimByteChannel : public ByteChannel {
 public:
  SimByteChannel(SimNet& net, SimGroup& g, int pos, int64_t seq) : net_(net), g_(g), pos_(pos), seq_(seq) {}
  void alltoall(const void* in, void* out, size_t n) override {
    const size_t sz = g_.members.size();
    for (size_t r = 0; r < sz; ++r)
      if (n && in && out)
        std::memmove(static_cast<char*>(out) + r * n, static_cast<const char*>(in) + size_t(pos_) * n, n);
    ring_rounds(net_, g_, pos_, int(sz) - 1, double(n), seq_ * 64 + sub_++, true);
  }
  void allgather(const void* in, void* out, size_t n) override {
    const size_t sz = g_.members.size();
    for (size_t r = 0; r < sz; ++r)
      if (n && in && out && static_cast<char*>(out) + r * n != in) std::memmove(static_cast<char*>(out) + r * n, in, n);
    ring_rounds(net_, g_, pos_, int(sz) - 1, double(n), seq_ * 64 + sub_++, true);
  }

 private:
  SimNet& net_;
  SimGroup& g_;
  int pos_;
  int64_t seq_;
  int sub_ = 1;
};

// After member `pos`'s transfers of a data-moving collective: once every member has arrived, the first one past
// combines all members' vectors (sum, average, or the root's), and each copies the result into its own.
void combine(SimGroup& g, int pos, const Job& j, size_t n) {
  const int size = int(g.members.size());
  std::unique_lock<sg4::Mutex> lk(*g.mu);
  DataJob& d = g.data[j.seq];
  ++d.arrived;
  g.cv->notify_all();
  while (d.arrived < size) g.cv->wait(lk);
  if (!d.done) {
    d.result.assign(n, 0.0f);
    if (j.kind == kBroadcast) {
      std::copy(d.ptrs[size_t(j.root)], d.ptrs[size_t(j.root)] + n, d.result.begin());
    } else {
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < n; ++i) d.result[i] += d.ptrs[size_t(r)][i];
      if (j.op == ReduceOp::Avg)
        for (auto& x : d.result) x /= float(size);
    }
    d.done = true;
  }
  std::copy(d.result.begin(), d.result.end(), j.data);
  if (++d.copied == size) g.data.erase(j.seq);
}

void comm_actor(SimNet* net, std::shared_ptr<SimGroup> g, int pos) {
  const int n = int(g->members.size());
  if (n > 1 && net->collectives != "ring") {  // the route latency to the ring successor, for fused collectives
    const double t0 = sg4::Engine::get_clock();
    sg4::Comm::sendto(net->hosts[size_t(g->members[size_t(pos)])],
                      net->hosts[size_t(g->members[size_t((pos + 1) % n)])], 0);
    g->latency[pos] = sg4::Engine::get_clock() - t0;
  }
  Channel& c = *g->ch[size_t(pos)];
  const int world = g->members[size_t(pos)];
  while (true) {
    std::pair<int64_t, Job> job;
    {
      std::unique_lock<sg4::Mutex> lk(*c.mu);
      while (c.queue.empty() && !c.stop) c.cv->wait(lk);
      if (c.queue.empty()) return;
      job = std::move(c.queue.front());
      c.queue.pop_front();
    }
    const Job& j = job.second;
    if (j.data) {
      std::unique_lock<sg4::Mutex> lk(*g->mu);
      auto& d = g->data[j.seq];
      d.ptrs.resize(size_t(n), nullptr);
      d.ptrs[size_t(pos)] = j.data;
    }
    std::exception_ptr err;
    try {
      const bool bulk = !j.data;
      if (j.kind == kAllreduce) ring_rounds(*net, *g, pos, 2 * (n - 1), double(j.bytes) / n, j.seq * 64, bulk);
      else if (j.kind == kBroadcast) ring_rounds(*net, *g, pos, 1, double(j.bytes), j.seq * 64, bulk);  // pipelined
      else {
        SimByteChannel bc(*net, *g, pos, j.seq);
        j.fn(bc);
      }
      if (j.data) combine(*g, pos, j, size_t(j.bytes / 4));
    } catch (...) {
      err = std::current_exception();
    }
    std::unique_lock<sg4::Mutex> lk(*c.mu);
    if (err) c.errors[job.first] = err;
    c.end[size_t(job.first)] = sg4::Engine::get_clock();
    c.done = job.first + 1;
    if (!j.data && --net->comm_busy[size_t(world)] == 0) end_slowed_compute(*net, world);
    c.cv->notify_all();
  }
}

void start_actor(SimNet& net, const std::shared_ptr<SimGroup>& g, int pos) {
  const int world = g->members[size_t(pos)];
  // It ends once its SimBackend is destroyed and its queue is empty.
  sg4::Actor::create("comm" + std::to_string(world) + (g->id ? "/g" + std::to_string(g->id) : ""),
                     net.hosts[size_t(world)], [&net, g, pos] { comm_actor(&net, g, pos); });
}

class SimWork : public Work {
 public:
  SimWork(std::shared_ptr<SimGroup> g, Channel* c, int64_t id) : g_(std::move(g)), c_(c), id_(id) {}
  void wait() override {
    std::unique_lock<sg4::Mutex> lk(*c_->mu);
    while (c_->done <= id_) c_->cv->wait(lk);
    auto e = c_->errors.find(id_);
    if (e != c_->errors.end()) std::rethrow_exception(e->second);
  }
  bool test() override { return c_->done > id_; }
  double end_time() const override { return c_->done > id_ ? c_->end[size_t(id_)] : 0; }

 private:
  std::shared_ptr<SimGroup> g_;  // keeps the channel alive
  Channel* c_;
  int64_t id_;
};

}  // namespace

void SimBackend::make_world(SimNet& net) {
  std::vector<int> m(net.hosts.size());
  for (size_t r = 0; r < m.size(); ++r) m[r] = int(r);
  net.world = make_group(net, m);
}

std::unique_ptr<SimBackend> SimBackend::world(SimNet& net, int rank) {
  return std::make_unique<SimBackend>(net, net.world, rank);
}

SimBackend::SimBackend(SimNet& net, std::shared_ptr<SimGroup> g, int pos) : net_(net), g_(std::move(g)), pos_(pos) {
  start_actor(net_, g_, pos_);
}

SimBackend::~SimBackend() {
  Channel& c = *g_->ch[size_t(pos_)];
  std::unique_lock<sg4::Mutex> lk(*c.mu);
  c.stop = true;
  c.cv->notify_all();
}

int SimBackend::size() const { return int(g_->members.size()); }

WorkPtr SimBackend::push(int kind, int64_t bytes, std::function<void(ByteChannel&)> fn, float* data, ReduceOp op,
                         int root) {
  Channel& c = *g_->ch[size_t(pos_)];
  std::unique_lock<sg4::Mutex> lk(*c.mu);
  const int64_t id = int64_t(c.end.size());
  c.end.push_back(0);
  Job j;
  j.kind = kind;
  j.bytes = bytes;
  j.seq = id;
  j.fn = std::move(fn);
  j.data = data;
  j.op = op;
  j.root = root;
  c.queue.emplace_back(id, std::move(j));
  if (!data) ++net_.comm_busy[size_t(g_->members[size_t(pos_)])];  // bulk only: a vote's few floats cost no CPU
  c.cv->notify_all();
  return std::make_shared<SimWork>(g_, &c, id);
}

// Collectives on the sizes-only arenas move no data; any other vector (votes, an agreed profile, a trial's times)
// is what the ranks decide on, and is reduced for real.
WorkPtr SimBackend::allreduce(float* p, size_t n, ReduceOp op) {
  return push(kAllreduce, 4 * int64_t(n), nullptr, net_.moves(p) ? p : nullptr, op, 0);
}
WorkPtr SimBackend::broadcast(float* p, size_t n, int root) {
  return push(kBroadcast, 4 * int64_t(n), nullptr, net_.moves(p) ? p : nullptr, ReduceOp::Sum, root);
}
WorkPtr SimBackend::run_bytes(std::function<void(ByteChannel&)> fn, const char*, size_t bytes) {
  return push(kBytes, int64_t(bytes), std::move(fn));  // a compressed payload of the arenas: no data
}

std::vector<std::string> SimBackend::allgather(const std::string& blob) {
  g_->blobs[size_t(pos_)] = blob;
  g_->barrier->wait();
  std::vector<std::string> all = g_->blobs;
  g_->barrier->wait();  // nobody writes the next round before everyone has read this one
  return all;
}

void SimBackend::barrier() { g_->barrier->wait(); }

// SimGrid calls may switch actors anywhere (creating a barrier, a mutex): one member of each color creates the
// child group between two barriers, the others take it after the second.
std::unique_ptr<Backend> SimBackend::split(int color) {
  g_->colors[size_t(pos_)] = color;
  g_->barrier->wait();
  const auto key = std::make_pair(splits_++, color);
  int pos = 0;
  for (size_t i = 0; i < size_t(pos_); ++i) pos += g_->colors[i] == color;
  if (pos == 0) {
    std::vector<int> m;
    for (size_t i = 0; i < g_->members.size(); ++i)
      if (g_->colors[i] == color) m.push_back(g_->members[i]);
    g_->children[key] = make_group(net_, m);
  }
  g_->barrier->wait();
  std::shared_ptr<SimGroup> child = g_->children.at(key);
  return std::make_unique<SimBackend>(net_, child, pos);
}

}  // namespace dd::sim
