// summary.json of a run (run_loop.h).
#include <sys/resource.h>

#include <chrono>

#include "base/clock.h"
#include "core/train/run_loop.h"

namespace dd::train {

namespace {
// When this process started, near enough: static initialization runs before main.
const std::chrono::steady_clock::time_point kProcessStart = std::chrono::steady_clock::now();
}  // namespace

// summary.json: the configuration's key figures, throughput over the timed steps, the last loss and evaluation.
nlohmann::json run_summary(const TrainConfig& cfg, const std::string& backend, int64_t params, Throughput tp,
                           float loss, const nlohmann::json& last_eval) {
  const bool window = tp.end > tp.warm && tp.t_end > 0;  // whole periods, timed to the end of the last one
  const double t_end = window ? tp.t_end - tp.eval_end_s : now_s() - tp.eval_s;
  const int64_t timed_steps = (window ? tp.end : cfg.steps) - tp.warm;
  if (timed_steps <= 0 && cfg.steps - tp.start <= 0) tp.t_warm = tp.t_start;
  nlohmann::json s;
  s["model"] = cfg.model;
  s["policy"] = cfg.policy;
  s["backend"] = backend;
  s["device"] = name(cfg.device);
  s["world"] = cfg.world;
  s["batch"] = cfg.batch;
  s["steps"] = cfg.steps;
  s["params"] = params;
  s["threads"] = cfg.threads;
  s["subnormals"] = subnormals_name(cfg.subnormals);
  s["precision"] = precision_name(cfg.precision);
  s["last_period"] = cfg.last_period_local ? "local" : "scheduled";
  s["seed"] = cfg.seed;
  s["samples_per_s"] = timed_steps > 0 && t_end > tp.t_warm
                           ? double(timed_steps) * cfg.batch * cfg.world / (t_end - tp.t_warm)
                           : double(cfg.steps - tp.start) * cfg.batch * cfg.world / (t_end - tp.t_start);
  s["step_ms"] = timed_steps > 0 ? (t_end - tp.t_warm) / double(timed_steps) * 1e3
                                 : (t_end - tp.t_start) / double(std::max<int64_t>(1, cfg.steps - tp.start)) * 1e3;
  s["timed_steps"] = nlohmann::json::array({tp.warm, window ? tp.end : cfg.steps});  // [first, end)
  if (tp.period > 0) s["timed_periods"] = tp.periods;
  if (!tp.note.empty()) s["timed_note"] = tp.note;
  s["wall_s"] = (window ? now_s() - tp.eval_s : t_end) - tp.t_start;
  // From this process's start to now, as a user times a run (less the exit): start-up, connecting, every step
  // (warm-up, profiling and trial steps included) and the evaluations.
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
  s["run_s"] = run_s;
  s["samples_per_s_end_to_end"] = double(cfg.steps - tp.start) * cfg.batch * cfg.world / run_s;
  s["final_loss"] = loss;
  for (auto& [k, v] : last_eval.items()) s[k] = v;
  s["comm_bytes"] = tp.comm_bytes;
  s["exposed_comm_fraction"] = tp.exposed_fraction();
  // This rank's peak resident memory so far (the whole run: model, optimizer, data, engine copies in flight).
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) s["peak_rss_mb"] = double(ru.ru_maxrss) / 1024.0;
  return s;
}

}  // namespace dd::train
