// `dreamddp schedule`: solves the DreamDDP schedule for a profile directory and compares it with the baselines.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/train/run_dir.h"
#include "core/sync/profile_io.h"
#include "core/sync/schedule_choice.h"
#include "core/sync/schedule_io.h"
#include "core/sync/schedule_model.h"
#include "core/sync/schedule_solver.h"
#include "experiments/cli/parse_options.h"
#include "experiments/commands.h"

namespace dd::cli {

namespace {
namespace po = boost::program_options;

// printf-style formatting into std::cout, so callers (and tests) that redirect std::cout get everything.
template <typename... Args>
void say(const char* f, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  std::cout << buf;
}

std::string profile_name(const std::string& dir) {
  auto p = std::filesystem::path(dir);
  if (p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.filename().string();
}

}  // namespace

int cmd_schedule(int argc, char** argv) {
  po::options_description desc(
      "Usage: dreamddp schedule --profile DIR --h H [--fillin] [--phases P0,P1,...] [--delay T [--forward-ms F]\n"
      "                         [--update-ms U]] [--out FILE]\n"
      "Solves the DreamDDP per-layer sync schedule for a profile (DIR/bp.json, DIR/comm.json) and prints the\n"
      "modelled time per iteration of ddp, localsgd, plsgd and dreamddp; last line is JSON. With --phases the\n"
      "given schedule (one phase per layer, forward order) is evaluated instead of solved. With --delay T it also\n"
      "models dreamddp:h=H,delay=T (averages merged T steps later; one channel across iterations, through forward\n"
      "and update: give their times per iteration) on the schedule that policy runs, and localsgd:k=H,delay=T.\n"
      "A profile's overlap.json (measured by `dreamddp profile`: how much overlapped communication and compute\n"
      "slow each other) is charged to every overlapping schedule, and dreamddp runs Local SGD's where that is\n"
      "modelled faster.\nOptions");
  desc.add_options()("help", "show this help")(
      "profile", po::value<std::string>(), "directory holding bp.json and comm.json (layer -> seconds)")(
      "h", po::value<int>(), "H: each layer is synchronized once every H steps (>= 1)")(
      "fillin", po::bool_switch(), "add extra syncs of layers into idle communication time")(
      "phases", po::value<std::string>(), "evaluate this schedule (comma-separated phases in [0, H), one per layer)")(
      "delay", po::value<int>(), "T: also model the delayed merge, 0 <= T < H")(
      "forward-ms", po::value<double>()->default_value(0), "forward time per iteration for --delay (ms)")(
      "update-ms", po::value<double>()->default_value(0), "update time per iteration for --delay (ms)")(
      "out", po::value<std::string>(), "write {\"H\", \"schedule\"[, \"fillin\"]} JSON to FILE (must not exist)");
  po::variables_map vm;
  if (!parse_options("schedule", desc, argc, argv, vm)) return 0;
  if (!vm.count("profile")) throw UsageError("schedule: --profile DIR is required");
  if (!vm.count("h")) throw UsageError("schedule: --h H is required");
  const int H = vm["h"].as<int>();
  if (H < 1 || H > sync::kMaxPhases)
    throw UsageError("schedule: --h must be in [1, " + std::to_string(sync::kMaxPhases) + "], got " + std::to_string(H));
  const std::string dir = vm["profile"].as<std::string>();
  const bool use_fillin = vm["fillin"].as<bool>();
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  if (!out.empty() && std::filesystem::exists(out))
    throw UsageError("schedule: refusing to overwrite existing file " + out);
  if (!out.empty()) train::check_output_file("--out", out);  // before the solve prints anything

  const int delay = vm.count("delay") ? vm["delay"].as<int>() : -1;
  if (vm.count("delay") && (delay < 0 || delay >= H))
    throw UsageError("schedule: --delay must be in [0, H), got " + std::to_string(delay));
  const double fwd_ms = vm["forward-ms"].as<double>(), upd_ms = vm["update-ms"].as<double>();
  if (!(fwd_ms >= 0 && fwd_ms < 1e9) || !(upd_ms >= 0 && upd_ms < 1e9))
    throw UsageError("schedule: --forward-ms and --update-ms must be in [0, 1e9)");
  const auto prof = sync::read_profile(dir);
  const auto& b = prof.bp;
  const auto& c = prof.comm;
  const double B = sync::total_backward(b);
  const double C = std::accumulate(c.begin(), c.end(), 0.0);

  auto sol = sync::solve_schedule(b, c, H);
  sol.phase = sync::prefer_plsgd_on_tie(b, c, H, sol.phase);  // what the engine runs (schedule_phases)
  if (vm.count("phases")) {
    const std::string text = vm["phases"].as<std::string>();
    std::vector<int> given;
    size_t pos = 0;
    while (pos <= text.size()) {
      const size_t comma = std::min(text.find(',', pos), text.size());
      const std::string tok = text.substr(pos, comma - pos);
      size_t used = 0;
      long v = -1;
      try {
        v = std::stol(tok, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (tok.empty() || used != tok.size() || v < 0 || v >= H)
        throw UsageError("schedule: --phases: '" + tok + "' is not a phase in [0, " + std::to_string(H) + ")");
      given.push_back(int(v));
      if (given.size() > b.size()) break;
      pos = comma + 1;
    }
    if (given.size() != b.size())
      throw UsageError("schedule: --phases gives " + std::string(given.size() > b.size() ? "more than " : "") +
                       std::to_string(std::min(given.size(), b.size() + 1) - (given.size() > b.size())) +
                       " phases for " + std::to_string(b.size()) + " layers");
    sol.phase = given;
    sol.time = sync::modelled_time(b, c, H, given);
    sol.gap = sol.time > 0 ? (sol.time - sol.lower_bound) / sol.time : 0;
    sol.optimal = sol.gap <= 0;
  }
  const sync::Contention& k = prof.contention;
  const auto plsgd_phase = sync::contiguous_groups(c, H);
  sync::FillIn fill;
  bool runs_local = false;
  if (!vm.count("phases")) {  // what the policy runs (dreamddp.cpp on_profile): choose_in_step
    auto choice = sync::choose_in_step(b, c, H, sol.phase, use_fillin, k);
    sol.phase = choice.phase;
    if (use_fillin) fill = choice.fill;
    runs_local = choice.local_sgd;
  } else if (use_fillin) {
    fill = sync::fill_in(b, c, H, sol.phase);
  }
  const sync::FillIn* fillp = use_fillin ? &fill : nullptr;
  const auto waits = sync::phase_waits(b, c, H, sol.phase, fillp);

  const double t_ddp = sync::ddp_time(b, c);
  // DDP as the engine runs it: every layer's all-reduce launched from the hook on one FIFO channel (H = 1).
  const double t_ddp_overlap = sync::modelled_time(b, c, 1, std::vector<int>(b.size(), 0), nullptr, k);
  const double t_local = sync::localsgd_time(b, c, H);
  const double t_plsgd = sync::modelled_time(b, c, H, plsgd_phase, nullptr, k);
  const double t_dream = sync::modelled_time(b, c, H, sol.phase, fillp, k);

  std::cout << "DreamDDP schedule (times in ms; phase = step mod H at which the layer is averaged)\n";
  say("%5s  %-44s %10s %10s %6s %6s  %s\n", "layer", "name", "bp_ms", "comm_ms", "phase", "plsgd",
              use_fillin ? "fill-in phases" : "");
  for (size_t l = 0; l < prof.names.size(); ++l) {
    std::string extra;
    if (use_fillin)
      for (int p : fill[l]) extra += (extra.empty() ? "" : ",") + std::to_string(p);
    say("%5zu  %-44s %10.4f %10.4f %6d %6d  %s\n", l, prof.names[l].c_str(), b[l] * 1e3, c[l] * 1e3,
                sol.phase[l], plsgd_phase[l], extra.c_str());
  }
  say("\n%5s %7s %12s %12s\n", "phase", "layers", "comm_s", "wait_s");
  for (int p = 0; p < H; ++p) {
    int n = 0;
    double cp = 0;
    for (size_t l = 0; l < c.size(); ++l)
      if (sol.phase[l] == p) ++n, cp += c[l];
    say("%5d %7d %12.6f %12.6f\n", p, n, cp, waits[p]);
  }
  size_t n_fill = 0;
  for (auto& f : fill) n_fill += f.size();

  say("\nprofile            %s (%s)\n", profile_name(dir).c_str(), dir.c_str());
  say("layers             %zu\n", prof.names.size());
  say("H                  %d\n", H);
  say("B = sum bp         %.6f s\n", B);
  say("C = sum comm       %.6f s\n", C);
  if (!k.none())
    say("contention         compute x%.3f, communication x%.3f while they overlap (overlap.json; charged to ddp, "
        "plsgd and dreamddp)\n", 1 + k.compute, 1 + k.comm);
  say("modelled time per iteration (s):\n");
  say("  ddp (B+C)        %.6f\n", t_ddp);
  say("  ddp, overlapped  %.6f  (all-reduces on one FIFO channel from the hook, as the engine runs ddp)\n",
      t_ddp_overlap);
  say("  localsgd (B+C/H) %.6f\n", t_local);
  say("  plsgd            %.6f\n", t_plsgd);
  say("  dreamddp         %.6f%s\n", t_dream, use_fillin ? "  (with fill-in)" : "");
  if (runs_local)
    say("  dreamddp runs Local SGD's schedule: %.6f s, faster than its layer-wise one once overlap is charged\n",
        t_local);
  double t_delay = 0, t_local_delay = 0;
  if (delay >= 0) {
    const auto dph = vm.count("phases") ? sol.phase : sync::schedule_phases_delayed(b, c, H, delay);
    t_delay = sync::delayed_time(b, c, H, dph, delay, fwd_ms / 1e3, upd_ms / 1e3) - (fwd_ms + upd_ms) / 1e3;
    say("  dreamddp delay=%d %.6f  (backward + exposed comm; forward %.3f + update %.3f ms overlapped by the channel)\n",
        delay, t_delay, fwd_ms, upd_ms);
    t_local_delay = sync::localsgd_delayed_time(b, c, H, delay, fwd_ms / 1e3, upd_ms / 1e3) - (fwd_ms + upd_ms) / 1e3;
    say("  localsgd delay=%d %.6f  (whole model launched after every H-th update, merged T steps later)\n", delay,
        t_local_delay);
  }
  say("  lower bound      %.6f\n", sol.lower_bound);
  say("gap to bound       %.4f%%  (%s)\n", sol.gap * 100,
              sol.optimal ? "proven optimal" : sol.gap <= 0.01 ? "proven within 1% of optimal"
                                                                 : "NOT proven within 1% of optimal");
  say("solve time         %.4f s (%lld branch-and-bound nodes)\n", sol.solve_s, sol.nodes);
  if (use_fillin) say("fill-in            %zu extra layer syncs in idle bandwidth\n", n_fill);

  if (!out.empty()) {
    sync::write_schedule(out, prof.names, H, sol.phase, fillp);
    say("schedule written   %s\n", out.c_str());
  }
  nlohmann::ordered_json j;
  j["ddp"] = t_ddp;
  j["ddp_overlap"] = t_ddp_overlap;
  j["localsgd"] = t_local;
  j["plsgd"] = t_plsgd;
  j["dreamddp"] = t_dream;
  j["compute_slowdown"] = k.compute;
  j["comm_slowdown"] = k.comm;
  j["dreamddp_runs"] = runs_local ? "localsgd" : "layerwise";
  if (delay >= 0) {
    j["dreamddp_delay"] = t_delay;
    j["localsgd_delay"] = t_local_delay;
  }
  j["lower_bound"] = sol.lower_bound;
  j["gap"] = sol.gap;
  j["H"] = H;
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace dd::cli
