// `dreamddp schedule`: solves the DreamDDP schedule for a profile directory and compares it with the baselines.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/parse_options.h"
#include "app/commands.h"
#include "base/error.h"
#include "core/sync/profile/profile_io.h"
#include "core/sync/schedule/schedule_choice.h"
#include "core/sync/schedule/schedule_io.h"
#include "core/sync/schedule/schedule_model.h"
#include "core/sync/schedule/schedule_solver.h"
#include "core/train/run_dir.h"

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

// Parse: the options, checked against themselves (the profile is not read yet).
struct ScheduleArgs {
  std::string dir, out;
  int H = 0;
  bool fillin = false;
  bool has_phases = false;
  std::vector<int> phases;  // --phases, each in [0, H); their count is checked against the profile
  int delay = -1;           // -1: no --delay
  double fwd_ms = 0, upd_ms = 0;
};

// Compute: the solved (or given) schedule, what the policy runs, and every modelled time.
struct ScheduleReport {
  sync::LayerProfile prof;
  double B = 0, C = 0;
  sync::ScheduleSolution sol;
  std::vector<int> plsgd_phase;
  sync::FillIn fill;
  bool runs_local = false;
  std::vector<double> waits;
  double t_ddp = 0, t_ddp_overlap = 0, t_local = 0, t_plsgd = 0, t_dream = 0, t_delay = 0, t_local_delay = 0;
  // With DIR/bytes.json: the latency fitted from the comm times over the sizes, and the times with fused buckets
  // (schedule_choice.h fused_comm); alpha 0 when the times are proportional to the sizes (nothing fused then).
  double alpha = 0;
  bool fused_plsgd = false;
  double f_ddp_overlap = 0, f_local = 0, f_plsgd = 0, f_dream = 0;
};

// DIR/bytes.json (written by `dreamddp profile`) in the profile's layer order; empty when absent.
std::vector<int64_t> profile_bytes(const std::string& dir, const std::vector<std::string>& names) {
  const auto file = (std::filesystem::path(dir) / "bytes.json").string();
  if (!std::filesystem::exists(file)) return {};
  std::vector<int64_t> out;
  for (double b : sync::read_layer_bytes(file, names)) out.push_back(int64_t(b));
  return out;
}

std::vector<int> parse_phases(const std::string& text, int H) {
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
    pos = comma + 1;
  }
  return given;
}

// false: --help was printed.
bool parse_schedule_args(int argc, char** argv, ScheduleArgs& a) {
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
  if (!parse_options("schedule", desc, argc, argv, vm)) return false;
  if (!vm.count("profile")) throw UsageError("schedule: --profile DIR is required");
  if (!vm.count("h")) throw UsageError("schedule: --h H is required");
  a.H = vm["h"].as<int>();
  if (a.H < 1 || a.H > sync::kMaxPhases)
    throw UsageError("schedule: --h must be in [1, " + std::to_string(sync::kMaxPhases) + "], got " +
                     std::to_string(a.H));
  a.dir = vm["profile"].as<std::string>();
  a.fillin = vm["fillin"].as<bool>();
  a.out = vm.count("out") ? vm["out"].as<std::string>() : "";
  if (!a.out.empty() && std::filesystem::exists(a.out))
    throw UsageError("schedule: refusing to overwrite existing file " + a.out);
  if (!a.out.empty()) train::check_output_file("--out", a.out);  // before the solve prints anything
  a.delay = vm.count("delay") ? vm["delay"].as<int>() : -1;
  if (vm.count("delay") && (a.delay < 0 || a.delay >= a.H))
    throw UsageError("schedule: --delay must be in [0, H), got " + std::to_string(a.delay));
  a.fwd_ms = vm["forward-ms"].as<double>();
  a.upd_ms = vm["update-ms"].as<double>();
  if (!(a.fwd_ms >= 0 && a.fwd_ms < 1e9) || !(a.upd_ms >= 0 && a.upd_ms < 1e9))
    throw UsageError("schedule: --forward-ms and --update-ms must be in [0, 1e9)");
  a.has_phases = vm.count("phases") > 0;
  if (a.has_phases) a.phases = parse_phases(vm["phases"].as<std::string>(), a.H);
  return true;
}

ScheduleReport compute_schedule(const ScheduleArgs& a) {
  ScheduleReport r;
  r.prof = sync::read_profile(a.dir);
  if (!r.prof.bp_nan.empty()) std::fprintf(stderr, "%s\n", sync::bp_nan_note(r.prof, a.dir).c_str());
  const auto& b = r.prof.bp;
  const auto& c = r.prof.comm;
  const int H = a.H;
  r.B = sync::total_backward(b);
  r.C = std::accumulate(c.begin(), c.end(), 0.0);
  auto& sol = r.sol;
  sol = sync::solve_schedule(b, c, H);
  sol.phase = sync::prefer_plsgd_on_tie(b, c, H, sol.phase);  // what the engine runs (schedule_phases)
  if (a.has_phases) {
    if (a.phases.size() != b.size())
      throw UsageError("schedule: --phases gives " + std::string(a.phases.size() > b.size() ? "more than " : "") +
                       std::to_string(std::min(a.phases.size(), b.size())) + " phases for " +
                       std::to_string(b.size()) + " layers");
    sol.phase = a.phases;
    sol.time = sync::modelled_time(b, c, H, a.phases);
    sol.gap = sol.time > 0 ? (sol.time - sol.lower_bound) / sol.time : 0;
    sol.optimal = sol.gap <= 0;
  }
  const sync::Contention& k = r.prof.contention;
  r.plsgd_phase = sync::contiguous_groups(c, H);
  const auto bytes = profile_bytes(a.dir, r.prof.names);
  if (!a.has_phases) {  // what the policy runs (dreamddp.cpp on_profile): choose_in_step
    auto choice = sync::choose_in_step(b, c, H, sol.phase, a.fillin, k, bytes);
    sol.phase = choice.phase;
    if (a.fillin) r.fill = choice.fill;
    r.runs_local = choice.local_sgd;
    r.fused_plsgd = choice.fused_plsgd;
  } else if (a.fillin) {
    r.fill = sync::fill_in(b, c, H, sol.phase);
  }
  const sync::FillIn* fillp = a.fillin ? &r.fill : nullptr;
  r.waits = sync::phase_waits(b, c, H, sol.phase, fillp);
  r.t_ddp = sync::ddp_time(b, c);
  // DDP as the engine runs it: every layer's all-reduce launched from the hook on one FIFO channel (H = 1).
  r.t_ddp_overlap = sync::modelled_time(b, c, 1, std::vector<int>(b.size(), 0), nullptr, k);
  r.t_local = sync::localsgd_time(b, c, H);
  r.t_plsgd = sync::modelled_time(b, c, H, r.plsgd_phase, nullptr, k);
  r.t_dream = sync::modelled_time(b, c, H, sol.phase, fillp, k);
  r.alpha = bytes.empty() ? 0 : sync::fitted_alpha(c, bytes);
  if (r.alpha > 0) {
    auto fused = [&](const std::vector<int>& phase) { return sync::fused_comm(c, bytes, phase, r.alpha); };
    const std::vector<int> one(b.size(), 0);
    r.f_ddp_overlap = sync::modelled_time(b, fused(one), 1, one, nullptr, k);
    r.f_local = sync::localsgd_time(b, fused(one), H);
    r.f_plsgd = sync::modelled_time(b, fused(r.plsgd_phase), H, r.plsgd_phase, nullptr, k);
    r.f_dream = sync::modelled_time(b, fused(sol.phase), H, sol.phase, fillp, k);
  }
  if (a.delay >= 0) {
    const double f = a.fwd_ms / 1e3, u = a.upd_ms / 1e3;
    const auto dph = a.has_phases ? sol.phase : sync::schedule_phases_delayed(b, c, H, a.delay);
    r.t_delay = sync::delayed_time(b, c, H, dph, a.delay, f, u) - (a.fwd_ms + a.upd_ms) / 1e3;
    r.t_local_delay = sync::localsgd_delayed_time(b, c, H, a.delay, f, u) - (a.fwd_ms + a.upd_ms) / 1e3;
  }
  return r;
}

// The per-layer table: backward and comm times, the solved phase, plsgd's phase and (--fillin) extra phases.
void print_layer_table(const ScheduleArgs& a, const ScheduleReport& r) {
  const auto& prof = r.prof;
  std::cout << "DreamDDP schedule (times in ms; phase = step mod H at which the layer is averaged)\n";
  say("%5s  %-44s %10s %10s %6s %6s  %s\n", "layer", "name", "bp_ms", "comm_ms", "phase", "plsgd",
      a.fillin ? "fill-in phases" : "");
  for (size_t l = 0; l < prof.names.size(); ++l) {
    std::string extra;
    if (a.fillin)
      for (int p : r.fill[l]) extra += (extra.empty() ? "" : ",") + std::to_string(p);
    say("%5zu  %-44s %10.4f %10.4f %6d %6d  %s\n", l, prof.names[l].c_str(), prof.bp[l] * 1e3, prof.comm[l] * 1e3,
        r.sol.phase[l], r.plsgd_phase[l], extra.c_str());
  }
}

// Per phase: its layers, their comm time and the modelled wait.
void print_phase_table(const ScheduleArgs& a, const ScheduleReport& r) {
  const auto& c = r.prof.comm;
  say("\n%5s %7s %12s %12s\n", "phase", "layers", "comm_s", "wait_s");
  for (int p = 0; p < a.H; ++p) {
    int n = 0;
    double cp = 0;
    for (size_t l = 0; l < c.size(); ++l)
      if (r.sol.phase[l] == p) ++n, cp += c[l];
    say("%5d %7d %12.6f %12.6f\n", p, n, cp, r.waits[p]);
  }
}

// The modelled time per iteration of every policy (with fused buckets and --delay where given).
void print_modelled_times(const ScheduleArgs& a, const ScheduleReport& r) {
  say("modelled time per iteration (s):\n");
  say("  ddp (B+C)        %.6f\n", r.t_ddp);
  say("  ddp, overlapped  %.6f  (all-reduces on one FIFO channel from the hook, as the engine runs ddp)\n",
      r.t_ddp_overlap);
  say("  localsgd (B+C/H) %.6f\n", r.t_local);
  say("  plsgd            %.6f\n", r.t_plsgd);
  say("  dreamddp         %.6f%s\n", r.t_dream, a.fillin ? "  (with fill-in)" : "");
  if (r.runs_local)
    say("  dreamddp runs Local SGD's schedule: %.6f s, faster than its layer-wise one once overlap is charged\n",
        r.t_local);
  if (r.alpha > 0) {
    say("with fused buckets (bytes.json; latency %.3f ms fitted, paid once per bucket of up to 25 MiB):\n",
        r.alpha * 1e3);
    say("  ddp, overlapped  %.6f\n  localsgd         %.6f\n  plsgd            %.6f\n  dreamddp         %.6f%s\n",
        r.f_ddp_overlap, r.f_local, r.f_plsgd, r.f_dream,
        r.fused_plsgd ? "  (plsgd's split: faster than the solver's phases once fused)" : "");
  }
  if (a.delay >= 0) {
    say("  dreamddp delay=%d %.6f  (backward + exposed comm; forward %.3f + update %.3f ms overlapped by the channel)\n",
        a.delay, r.t_delay, a.fwd_ms, a.upd_ms);
    say("  localsgd delay=%d %.6f  (whole model launched after every H-th update, merged T steps later)\n", a.delay,
        r.t_local_delay);
  }
}

// The summary: the profile, its totals and contention, the modelled times, the bound and the solve.
void print_summary(const ScheduleArgs& a, const ScheduleReport& r) {
  const auto& sol = r.sol;
  const auto& k = r.prof.contention;
  size_t n_fill = 0;
  for (auto& f : r.fill) n_fill += f.size();
  say("\nprofile            %s (%s)\n", profile_name(a.dir).c_str(), a.dir.c_str());
  say("layers             %zu\n", r.prof.names.size());
  say("H                  %d\n", a.H);
  say("B = sum bp         %.6f s\n", r.B);
  say("C = sum comm       %.6f s\n", r.C);
  if (!k.none())
    say("contention         compute x%.3f, communication x%.3f while they overlap (overlap.json; charged to ddp, "
        "plsgd and dreamddp)\n", 1 + k.compute, 1 + k.comm);
  print_modelled_times(a, r);
  say("  lower bound      %.6f\n", sol.lower_bound);
  say("gap to bound       %.4f%%  (%s)\n", sol.gap * 100,
      sol.optimal ? "proven optimal" : sol.gap <= 0.01 ? "proven within 1% of optimal"
                                                       : "NOT proven within 1% of optimal");
  say("solve time         %.4f s (%lld branch-and-bound nodes)\n", sol.solve_s, sol.nodes);
  if (a.fillin) say("fill-in            %zu extra layer syncs in idle bandwidth\n", n_fill);
}

// The JSON line, last: every modelled time, the contention, what dreamddp runs, the bound and its gap.
void print_json(const ScheduleArgs& a, const ScheduleReport& r) {
  nlohmann::ordered_json j;
  j["ddp"] = r.t_ddp;
  j["ddp_overlap"] = r.t_ddp_overlap;
  j["localsgd"] = r.t_local;
  j["plsgd"] = r.t_plsgd;
  j["dreamddp"] = r.t_dream;
  j["compute_slowdown"] = r.prof.contention.compute;
  j["comm_slowdown"] = r.prof.contention.comm;
  j["dreamddp_runs"] = r.runs_local ? "localsgd" : "layerwise";
  if (r.alpha > 0) {
    j["alpha_s"] = r.alpha;
    j["dreamddp_phases"] = r.fused_plsgd ? "plsgd (fused buckets)" : "solver";
    j["fused"] = {{"ddp_overlap", r.f_ddp_overlap}, {"localsgd", r.f_local}, {"plsgd", r.f_plsgd},
                  {"dreamddp", r.f_dream}};
  }
  if (a.delay >= 0) {
    j["dreamddp_delay"] = r.t_delay;
    j["localsgd_delay"] = r.t_local_delay;
  }
  j["lower_bound"] = r.sol.lower_bound;
  j["gap"] = r.sol.gap;
  j["H"] = a.H;
  std::cout << j.dump() << std::endl;
}

// Print: the per-layer table, the per-phase waits, the summary, the schedule file, and the JSON line last.
void print_schedule(const ScheduleArgs& a, const ScheduleReport& r) {
  print_layer_table(a, r);
  print_phase_table(a, r);
  print_summary(a, r);
  if (!a.out.empty()) {
    sync::write_schedule(a.out, r.prof.names, a.H, r.sol.phase, a.fillin ? &r.fill : nullptr);
    say("schedule written   %s\n", a.out.c_str());
  }
  print_json(a, r);
}

}  // namespace

int cmd_schedule(int argc, char** argv) {
  ScheduleArgs a;
  if (!parse_schedule_args(argc, argv, a)) return 0;
  print_schedule(a, compute_schedule(a));
  return 0;
}

}  // namespace dd::cli
