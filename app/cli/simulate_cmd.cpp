// `dreamddp simulate`: the engine's policies and bucket plan on N x G simulated ranks over SimGrid's network model
// (app/sim), per-layer times from a profile; writes metrics.h5 / summary.json like `train`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/sync/control/control_file.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/run_dir.h"
#include "app/cli/parse_options.h"
#include "app/commands.h"
#include "app/sim/platform_spec.h"
#include "app/sim/sim_layers.h"
#include "app/sim/sim_output.h"
#include "app/sim/simulator.h"

namespace dd::cli {

namespace {
namespace po = boost::program_options;

// --KEY in seconds; when not given, the profile's own time (step.json), else 0.
double non_negative_ms(const po::variables_map& vm, const char* key, double from_profile_s) {
  if (!vm.count(key)) return std::max(from_profile_s, 0.0);
  const double v = vm[key].as<double>();
  if (!(v >= 0) || v > 1e9) throw UsageError(std::string("simulate: --") + key + " must be >= 0 ms");
  return v / 1e3;
}

// The repeatable options, as given.
struct Repeated {
  std::vector<std::string> slow, cfg, switches;
};

// What the command line asks for, read and checked.
struct SimulateArgs {
  sim::PlatformSpec platform;
  sim::SimOptions o;
  sim::LayerSizeSource src;
  std::string profile, out;
};

const char* const kUsage =
    "Usage: dreamddp simulate --profile DIR (--cluster NxG[,intra=BW][,inter=BW][,lat=T] | --platform FILE)\n"
    "                         --policy SPEC --steps S [--batch B] [--out DIR] [options]\n"
    "Runs the sync engine itself on simulated ranks over SimGrid: each rank computes forward and per-layer\n"
    "backward times from the profile (DIR/bp.json, DIR/comm.json), and the engine launches, waits and logs as in\n"
    "train, its collectives ring all-reduces simulated as their chunk transfers. --cluster: N nodes of G ranks;\n"
    "each rank has a link of `intra` to its node switch, each node an uplink of `inter` to the top switch; `lat`\n"
    "is the node-to-node latency (defaults: intra=800Gbps, inter=1Gbps, lat=0us). Bandwidths: bps/Mbps/Gbps (bits) or Bps/MBps/GBps (bytes); times: s/ms/us/ns.\n"
    "Last line is a JSON summary.\nOptions";

// The options of `simulate`; the repeatable ones are collected into `r`.
void add_simulate_options(po::options_description& desc, Repeated& r) {
  desc.add_options()("help", "show this help")(
      "profile", po::value<std::string>(), "directory holding bp.json and comm.json (layer -> seconds)")(
      "cluster", po::value<std::string>(), "NxG[,intra=BW][,inter=BW][,lat=T], e.g. 16x8,intra=300GBps,inter=1Gbps,lat=50us")(
      "platform", po::value<std::string>(), "a SimGrid XML platform instead; ranks = its hosts sorted by name, "
      "grouped (hier nodes=auto) by their zone; hosts of 1Gf run the profile's times")(
      "policy", po::value<std::string>()->default_value("ddp"), "policy spec, as for train (ddp, localsgd:k=K, "
      "plsgd:h=H, dreamddp:h=H[,profile=DIR], fixed:..., staleness:t=T, hier:...; merge keys delay=, outer=, "
      "compress=)")(
      "switch", po::value(&r.switches)->composing(), "STEP:SPEC: switch to policy SPEC at STEP (repeatable), as train")(
      "control-file", po::value<std::string>(), "rank 0 watches FILE: a policy spec written there is switched to, "
      "as train")(
      "steps", po::value<int64_t>()->default_value(100), "simulated steps")(
      "batch", po::value<int64_t>()->default_value(0), "per-rank batch size (for samples_per_s)")(
      "out", po::value<std::string>(), "write metrics.h5 and summary.json to DIR (must be empty)")(
      "overwrite", po::bool_switch(), "allow a non-empty --out")(
      "slow", po::value(&r.slow)->composing(), "RANK=FACTOR: that rank's compute takes FACTOR times as long "
      "(straggler; repeatable), e.g. --slow 3=1.5")(
      "shared-cores", po::value<std::string>(), "C[,threads=T]: every rank computes on one machine of C cores, T "
      "per rank (default 1), as ranks launched on one host with emulated links; ranks computing at once share "
      "them (the profile's times must then be of one rank computing alone)")(
      "model", po::value<std::string>(), "layer sizes from this project's model (mlp, cnn, resnet20, gpt-mini); "
      "the profile must name its layers (e.g. one written by `dreamddp profile`)")(
      "bytes", po::value<std::string>(), "layer sizes from a JSON file layer -> bytes (default DIR/bytes.json)")(
      "comm-bw", po::value<std::string>(), "layer sizes implied by the comm times: bytes = comm_s x BW")(
      "forward-ms", po::value<double>(), "forward time per step (default: the profile's step.json, else 0)")(
      "update-ms", po::value<double>(), "optimizer update time per step (default: the profile's step.json, else 0)")(
      "bucket-cap-mb", po::value<double>()->default_value(25), "bucket cap in MiB (0: one bucket per layer)")(
      "first-bucket-mb", po::value<double>()->default_value(1), "first bucket cap in MiB")(
      "avg-optimizer-state", po::bool_switch(), "average optimizer state with the parameters (as train's option)")(
      "last-period", po::value<std::string>()->default_value("local"), "local | scheduled, as train's option")(
      "opt-slots", po::value<int>()->default_value(1), "optimizer state slots (sgd 1, adamw 2)")(
      "anomaly", po::value<std::string>()->default_value("fallback"), "as train: anything but off adds the anomaly "
      "flag to the per-step control all-reduce")(
      "signals", po::value<std::string>()->default_value("none"), "none: refuse policies that read gradient "
      "signals; constant: feed them cos = 1, norm = 1 (hier then picks its fast tier in forward order)")(
      "events", po::value<std::string>()->default_value("rank0"), "rank0 (as train) or all: whose /sync_events")(
      "collectives", po::value<std::string>()->default_value("auto"), "ring: 2(n-1) chunk transfers per rank; "
      "fused: one flow of 2(n-1)/n x bytes per ring edge (faster to simulate; latency paid once, not per step); "
      "auto: ring up to 32 ranks per collective, fused beyond")(
      "cfg", po::value(&r.cfg)->composing(), "SimGrid option KEY:VALUE (repeatable), e.g. network/model:CM02");
}

// --profile, and exactly one of --cluster and --platform; then the platform and its --slow ranks.
sim::PlatformSpec read_platform(const po::variables_map& vm, const Repeated& r) {
  if (!vm.count("profile")) throw UsageError("simulate: --profile DIR is required");
  if (vm.count("cluster") == vm.count("platform"))
    throw UsageError("simulate: give exactly one of --cluster NxG[,...] and --platform FILE");
  sim::PlatformSpec platform;
  if (vm.count("cluster")) platform = sim::parse_cluster(vm["cluster"].as<std::string>());
  else platform.file = vm["platform"].as<std::string>();
  for (auto& s : r.slow) sim::parse_slow(s, platform);
  if (vm.count("shared-cores")) {
    if (!platform.file.empty())
      throw UsageError("simulate: --shared-cores goes with --cluster (a platform file would need the machine in it)");
    sim::parse_shared_cores(vm["shared-cores"].as<std::string>(), platform);
  }
  return platform;
}

// The run: policy and its switches, control file, steps, batch, buckets, optimizer state.
void read_run_options(const po::variables_map& vm, const Repeated& r, sim::SimOptions& o) {
  o.policy = vm["policy"].as<std::string>();
  o.switches = r.switches;
  if (vm.count("control-file")) {
    o.control_file = vm["control-file"].as<std::string>();
    sync::check_control_file_path("simulate: --control-file", o.control_file);
  }
  o.steps = vm["steps"].as<int64_t>();
  if (o.steps < 1 || o.steps > 10000000) throw UsageError("simulate: --steps must be in [1, 10000000]");
  o.batch = vm["batch"].as<int64_t>();
  if (o.batch < 0) throw UsageError("simulate: --batch must be >= 0");
  const double cap = vm["bucket-cap-mb"].as<double>(), first = vm["first-bucket-mb"].as<double>();
  if (!(cap >= 0) || cap > 1e6 || !(first >= 0) || first > 1e6)
    throw UsageError("simulate: --bucket-cap-mb and --first-bucket-mb must be in [0, 1e6]");
  o.bucket_cap_bytes = int64_t(cap * (1 << 20));
  o.first_bucket_bytes = int64_t(first * (1 << 20));
  o.average_optimizer_state = vm["avg-optimizer-state"].as<bool>();
  const std::string last_period = vm["last-period"].as<std::string>();
  if (last_period != "local" && last_period != "scheduled")
    throw UsageError("simulate: --last-period must be local or scheduled, got '" + last_period + "'");
  o.last_period_local = last_period == "local";
  o.opt_slots = vm["opt-slots"].as<int>();
  if (o.opt_slots < 0 || o.opt_slots > 8) throw UsageError("simulate: --opt-slots must be in [0, 8]");
}

// The engine's and SimGrid's settings: anomaly votes, signals, whose events, collectives, --cfg.
void read_engine_options(const po::variables_map& vm, const Repeated& r, sim::SimOptions& o) {
  const std::string anomaly = vm["anomaly"].as<std::string>();
  if (anomaly != "off" && anomaly != "fallback" && anomaly != "stop")
    throw UsageError("simulate: --anomaly must be off, fallback or stop, got '" + anomaly + "'");
  o.anomaly_votes = anomaly != "off";
  const std::string signals = vm["signals"].as<std::string>();
  if (signals != "none" && signals != "constant")
    throw UsageError("simulate: --signals must be none or constant, got '" + signals + "'");
  o.constant_signals = signals == "constant";
  const std::string events = vm["events"].as<std::string>();
  if (events != "rank0" && events != "all") throw UsageError("simulate: --events must be rank0 or all");
  o.all_rank_events = events == "all";
  o.collectives = vm["collectives"].as<std::string>();
  if (o.collectives != "ring" && o.collectives != "fused" && o.collectives != "auto")
    throw UsageError("simulate: --collectives must be ring, fused or auto, got '" + o.collectives + "'");
  for (auto& c : r.cfg) {
    if (c.find(':') == std::string::npos || c.front() == ':' || c.back() == ':')
      throw UsageError("simulate: --cfg " + c + ": expected KEY:VALUE, e.g. network/model:CM02");
    o.simgrid_cfg.push_back(c);
  }
}

// Where the layer sizes come from: --model, --bytes or --comm-bw (else the profile's bytes.json).
sim::LayerSizeSource read_size_source(const po::variables_map& vm) {
  sim::LayerSizeSource src;
  if (vm.count("model")) src.model = vm["model"].as<std::string>();
  if (vm.count("bytes")) src.bytes = vm["bytes"].as<std::string>();
  if (vm.count("comm-bw")) src.comm_Bps = sim::parse_bandwidth(vm["comm-bw"].as<std::string>(), "--comm-bw");
  return src;
}

// Checks that need no simulation, before anything is written; then the run directory (with --out).
void prepare_output(const po::variables_map& vm, const SimulateArgs& a) {
  if (vm.count("cluster")) sim::check_actor_budget(a.platform.world(), "--cluster " + vm["cluster"].as<std::string>());
  if (!a.out.empty()) train::prepare_run_dir(a.out, vm["overwrite"].as<bool>(), true);
  if (!a.platform.file.empty() && !std::ifstream(a.platform.file))
    throw UsageError("--platform " + a.platform.file + ": cannot read the file");
}

// A progress line on stderr every 2 s of wall time, and after the last step.
std::function<void(int64_t)> progress_printer(int64_t steps) {
  const auto t0 = std::chrono::steady_clock::now();
  return [t0, steps, last = 0.0](int64_t step) mutable {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step + 1 == steps || el - last >= 2.0) {
      last = el;
      std::fprintf(stderr, "simulate: step %lld/%lld (%.1f s)\n", (long long)(step + 1), (long long)steps, el);
    }
  };
}

// metrics.h5 in --out, its attributes saying what was simulated; null without --out.
std::unique_ptr<telemetry::MetricsWriter> open_writer(const po::variables_map& vm, const SimulateArgs& a,
                                                      const Repeated& r, const sim::SimLayers& layers) {
  if (a.out.empty()) return nullptr;
  const sim::SimOptions& o = a.o;
  std::map<std::string, std::string> attrs = {
      {"profile", a.profile}, {"policy", o.policy}, {"data", "simulated"}, {"sizes", layers.size_source},
      {"cluster", vm.count("cluster") ? vm["cluster"].as<std::string>() : ""}, {"platform", a.platform.file},
      {"collectives", o.collectives}, {"out", a.out},
      {"shared_cores", vm.count("shared-cores") ? vm["shared-cores"].as<std::string>() : ""}};
  if (!a.src.model.empty()) attrs["model"] = a.src.model;
  std::string slows, sw;
  for (auto& s : r.slow) slows += (slows.empty() ? "" : ",") + s;
  for (auto& s : o.switches) sw += (sw.empty() ? "" : ";") + s;
  attrs["slow"] = slows;
  attrs["switch"] = sw;
  attrs["control_file"] = o.control_file;
  return sim::open_run(a.out, layers, o, attrs);
}

// The one-line account on stderr: step time, where the forward and update times came from, cost of the run.
void report_run(const po::variables_map& vm, const SimulateArgs& a, const sim::SimLayers& layers,
                const sim::SimResult& res, const nlohmann::ordered_json& summary) {
  const sim::SimOptions& o = a.o;
  // Where the forward and update times came from: a step that omits them is faster than any real one.
  const bool defaulted = !vm.count("forward-ms") || !vm.count("update-ms");
  const bool from_profile = defaulted && layers.forward_s >= 0, none = defaulted && layers.forward_s < 0;
  std::fprintf(stderr,
               "simulated %lld steps of %s on %d ranks (%d layers): %.3f ms/step (forward %.3f ms, update %.3f ms%s), "
               "exposed comm %.1f%%, %lld flows in %.2f s, peak RSS %.0f MB%s%s\n",
               (long long)o.steps, o.policy.c_str(), res.world, layers.size(), res.step_ms, o.forward_s * 1e3,
               o.update_s * 1e3,
               from_profile ? " from the profile's step.json"
               : none       ? "; the profile times the backward only: --forward-ms, --update-ms"
                            : "",
               res.exposed_comm_fraction * 100, (long long)res.flows, res.wall_s,
               summary.value("peak_rss_mb", 0.0), a.out.empty() ? "" : " -> ", a.out.c_str());
}

// The run itself, from a checked --out: the simulation, its metrics file, the account and the JSON summary.
void run_simulation(const po::variables_map& vm, const Repeated& r, const SimulateArgs& a,
                    const sim::SimLayers& layers) {
  prepare_output(vm, a);
  const auto progress = progress_printer(a.o.steps);
  if (a.platform.file.empty() && a.platform.world() >= 1024)  // set-up alone takes seconds to minutes: say so first
    std::fprintf(stderr, "simulate: setting up %d ranks (%d nodes x %d), %zu layers, %lld steps of %s\n",
                 a.platform.world(), a.platform.nodes, a.platform.per_node, layers.meta.size(),
                 (long long)a.o.steps, a.o.policy.c_str());
  auto writer = open_writer(vm, a, r, layers);
  const auto res = sim::simulate(layers, a.platform, a.o, progress, writer.get());
  auto summary = sim::summarize(res, layers, a.o, a.profile);
  if (writer) sim::finish_run(*writer, a.out, res, summary);
  report_run(vm, a, layers, res, summary);
  std::cout << summary.dump() << std::endl;
}

}  // namespace

int cmd_simulate(int argc, char** argv) {
  po::options_description desc(kUsage);
  Repeated r;
  add_simulate_options(desc, r);
  po::variables_map vm;
  if (!parse_options("simulate", desc, argc, argv, vm)) return 0;
  SimulateArgs a;
  a.platform = read_platform(vm, r);
  read_run_options(vm, r, a.o);
  read_engine_options(vm, r, a.o);
  a.src = read_size_source(vm);
  a.profile = vm["profile"].as<std::string>();
  const auto layers = sim::load_layers(a.profile, a.src);
  const std::string alone = sim::read_profile_meta(a.profile).shared_cores;
  if (!alone.empty() && a.platform.shared_cores == 0)
    std::fprintf(stderr, "simulate: note: %s timed each rank computing alone on a machine its ranks shared; "
                         "--shared-cores %s shares the cores again, as the profiled ranks did\n",
                 a.profile.c_str(), alone.c_str());
  a.o.forward_s = non_negative_ms(vm, "forward-ms", layers.forward_s);
  a.o.update_s = non_negative_ms(vm, "update-ms", layers.update_s);
  a.out = vm.count("out") ? vm["out"].as<std::string>() : "";
  // A run refused after its --out was made (the platform, the policy against the ranks) leaves no directory.
  const bool made_out = !a.out.empty() && !std::filesystem::exists(a.out);
  try {
    run_simulation(vm, r, a, layers);
  } catch (const UsageError&) {
    std::error_code ec;
    if (made_out) std::filesystem::remove_all(a.out, ec);
    throw;
  }
  return 0;
}

}  // namespace dd::cli
