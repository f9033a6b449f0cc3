// SimGrid implementation of simulate(): per rank one actor running the real sync engine and train's step
// (sim_rank.h), and per rank and backend group one communication actor (sim_backend.h); the engine reads SimGrid's
// clock. Nothing here mirrors the engine: what a rank launches, waits for and logs is LayerSync's own doing.
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>

#include "app/sim/sim_backend.h"
#include "app/sim/sim_rank.h"
#include "app/sim/simulator.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/sync/policy/registry.h"

namespace sg4 = simgrid::s4u;

namespace dd::sim {
namespace {

// Communication actors per rank: the world's, plus a control channel (delay=) or a hier group.
constexpr int kChannels = 2;

double simgrid_clock() { return sg4::Engine::get_clock(); }

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
  if (p.shared_cores > 0) {
    // --shared-cores: one more host, on no route, of that many cores at the nominal speed each. The ranks compute
    // there (sim_rank.cpp): ranks computing at once share its cores, as processes on one machine do.
    auto* m = sg4::create_star_zone("machine");
    m->set_parent(root);
    m->create_host("machine-cpu", kRefSpeed)->set_core_count(p.shared_cores)->seal();
    m->seal();
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

namespace {

// Refuses, before SimGrid starts, a policy (the first or a --switch one) that decides from gradient signals a
// simulation does not have, unless they are faked (--signals constant).
void refuse_signal_policies(const SimOptions& opt, const SimRun& run) {
  std::vector<const sync::PolicySpec*> all{&run.policy};
  for (auto& s : run.switches) all.push_back(&s.spec);
  for (const sync::PolicySpec* spec : all) {
    auto p = sync::make_policy(*spec);
    if (p->caps().voting && p->caps().voting->wants_signals() && !opt.constant_signals)
      throw UsageError("--policy " + spec->text + ": decides from local gradient signals, which a simulation has "
                       "none of; add --signals constant (every layer cos = 1, norm = 1) or use ddp, localsgd, "
                       "plsgd, dreamddp, fixed, staleness");
  }
}

// SimGrid checks model names only when the platform is built, and then aborts the process: check them here.
void check_model_name(const std::string& c) {
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
}

// The actors' stack size, then every --cfg KEY:VALUE.
void configure_engine(const SimOptions& opt) {
  // The schedule solver runs inside the actors (self-profiling policies): 128 KiB stacks overflowed at 128 ranks.
  sg4::Engine::set_config("contexts/stack-size:4096");
  for (auto& c : opt.simgrid_cfg) {
    check_model_name(c);
    try {
      sg4::Engine::set_config(c);
    } catch (const std::exception& ex) {
      throw UsageError("--cfg " + c + ": " + ex.what());
    }
  }
}

// The ranks' hosts (sorted by name) and the zone of each from --platform FILE, else the --cluster built here.
void load_hosts(sg4::Engine& e, const PlatformSpec& platform, std::vector<sg4::Host*>& hosts,
                std::vector<std::string>& nodes) {
  if (platform.file.empty()) return build_cluster(platform, hosts, nodes);
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
}

void check_slow_ranks(const PlatformSpec& platform, size_t world) {
  for (auto& [r, f] : platform.slow)
    if (r >= int(world))
      throw UsageError("--slow " + std::to_string(r) + "=...: rank " + std::to_string(r) + " is not below the world size " +
                       std::to_string(world));
}

// What every rank's actor shares: the layers, the options, the network's state, the arenas and the outputs.
void fill_run(SimRun& run, const SimLayers& layers, const PlatformSpec& platform, const SimOptions& opt,
              const std::vector<sg4::Host*>& hosts, const std::vector<std::string>& nodes) {
  const int n = int(hosts.size());
  run.layers = &layers;
  run.o = &opt;
  run.net.hosts = hosts;
  run.net.collectives = opt.collectives;
  run.net.comm_busy.assign(size_t(n), 0);
  run.net.idle.resize(size_t(n));
  run.net.comm_slowdown = layers.contention.comm;
  run.net.computed_s.assign(size_t(n), 0.0);
  run.net.computing_since.assign(size_t(n), -1.0);
  run.table.meta = layers.meta;
  run.table.ranges = layers.ranges;
  run.arenas = sizes_only_arenas(layers, opt.opt_slots, run.net, &run.scratch);
  run.nodes = nodes;
  run.slow = platform.slow;
  run.net.rank_threads = platform.rank_threads;
}


// A hier topology that does not cover the ranks is refused here, not inside an actor.
void check_topology(const SimRun& run, const SimLayers& layers, const std::vector<std::string>& nodes, int n) {
  auto p = sync::make_policy(run.policy);
  p->setup(layers.meta, n);
  auto g = p->caps().grouped ? p->caps().grouped->groups(nodes) : std::vector<int>{};
  if (!g.empty() && int(g.size()) != n)
    throw UsageError("--policy " + run.policy.text + ": topology does not cover the ranks");
}

// One actor per rank on its host, then the simulation to its end on SimGrid's clock. Rethrows the first rank's
// failure; throws when ranks were left waiting.
void run_ranks(sg4::Engine& e, SimRun& run, const std::vector<sg4::Host*>& hosts) {
  const int n = int(hosts.size());
  SimBackend::make_world(run.net);
  set_clock(&simgrid_clock);
  for (int r = 0; r < n; ++r)
    sg4::Actor::create("rank" + std::to_string(r), hosts[size_t(r)], [&run, r] {
      try {
        run_rank(run, r);
        ++run.finished;
      } catch (...) {  // the first failure stops every rank (the others would wait for it forever)
        if (!run.error) run.error = std::current_exception();
        sg4::Actor::kill_all();
      }
    });
  try {
    e.run();
  } catch (...) {
    set_clock(nullptr);
    throw;
  }
  set_clock(nullptr);
  if (run.error) std::rethrow_exception(run.error);
  if (run.finished != n)  // SimGrid found every actor waiting: the ranks' collectives did not match
    throw std::runtime_error("simulate: " + std::to_string(n - run.finished) + " of " + std::to_string(n) +
                             " simulated ranks never finished (their collectives did not match); no result");
}

}  // namespace

SimResult simulate(const SimLayers& layers, const PlatformSpec& platform, const SimOptions& opt,
                   const std::function<void(int64_t)>& progress, telemetry::MetricsWriter* metrics) {
  SimRun run;  // the policy and its switches, parsed once for the run
  run.policy = sync::PolicySpec::parse(opt.policy);
  run.switches = sync::parse_switches(opt.switches);
  refuse_signal_policies(opt, run);
  static bool started = false;
  if (started) throw std::logic_error("simulate: SimGrid runs once per process");
  started = true;
  const auto t_wall = std::chrono::steady_clock::now();
  int argc = 2;
  char name[] = "dreamddp-simulate";
  char quiet[] = "--log=root.thres:warning";  // SimGrid's INFO lines (configuration changes) are not ours to print
  char* argv[] = {name, quiet, nullptr};
  sg4::Engine e(&argc, argv);
  configure_engine(opt);
  std::vector<sg4::Host*> hosts;
  std::vector<std::string> nodes;
  load_hosts(e, platform, hosts, nodes);
  check_slow_ranks(platform, hosts.size());

  const int n = int(hosts.size());
  SimResult res;
  res.world = n;
  res.hosts = nodes;
  fill_run(run, layers, platform, opt, hosts, nodes);
  if (platform.shared_cores > 0) run.net.cpu = e.host_by_name("machine-cpu");
  run.metrics = metrics;
  run.progress = &progress;
  run.res = &res;
  check_topology(run, layers, nodes, n);
  run_ranks(e, run, hosts);
  res.simulated_s = run.last_end;
  res.flows = run.net.flows;
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wall).count();
  return res;
}

}  // namespace dd::sim
