// The simulation itself: N ranks as SimGrid actors, each running the real sync engine (LayerSync, through
// make_layer_sync) and train's step (core/train/step.h) over stand-ins: a compute that sleeps the profile's times
// and calls the backward hook per layer, a Backend whose collectives take their simulated ring time (sim_backend.h),
// arenas that hold sizes rather than data, and SimGrid's clock as the engine's clock.
// This header has no SimGrid types; simulator.cpp (SimGrid) or simulator_stub.cpp (built without it) implements it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/telemetry/rows.h"

namespace dd::telemetry {
class MetricsWriter;
}
#include "app/sim/platform_spec.h"
#include "app/sim/sim_layers.h"

namespace dd::sim {

struct SimOptions {
  std::string policy = "ddp";
  std::vector<std::string> switches;  // STEP:SPEC, as train's --switch
  std::string control_file;           // as train's --control-file (rank 0 watches it)
  bool verbose = true;                // rank 0 prints the plan, as train does
  int64_t steps = 10;
  int64_t batch = 0;                  // per rank; 0: samples/s not reported
  double forward_s = 0;               // per step (profiles carry backward only)
  double update_s = 0;                // optimizer update per step
  int64_t bucket_cap_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;
  bool average_optimizer_state = false;
  bool last_period_local = true;      // as train's --last-period local (closing_period.h)
  int opt_slots = 1;                  // optimizer state slots (SGD momentum 1, AdamW 2)
  bool anomaly_votes = true;          // train's default --anomaly fallback: its flag rides the control all-reduce
  bool constant_signals = false;      // feed policies that read gradient signals cos = 1, norm = 1
  bool all_rank_events = false;       // /sync_events of every rank (default rank 0 only, as training writes)
  std::string collectives = "auto";   // ring: 2(n-1) chunk transfers per rank; fused: one flow per ring edge;
                                      // auto: ring up to 32 ranks per collective, fused beyond
  std::vector<std::string> simgrid_cfg;  // "network/model:CM02", ...
};

struct SimResult {
  int world = 0;
  std::vector<std::string> hosts;            // per rank: the node (group) it is on
  std::vector<telemetry::StepRow> steps;     // rank 0's view, as training writes them
  std::vector<int64_t> collectives_per_rank; // every collective each rank ran (hook, blocking, control)
  double step_ms = 0;                        // rank 0, over train's timed steps (as its summary)
  int64_t timed_first = 0, timed_end = 0;    // those steps, [first, end)
  double exposed_comm_fraction = 0;          // rank 0, after warm-up
  double simulated_s = 0;                    // simulated time at the end of the last step of the slowest rank
  int64_t flows = 0;                         // point-to-point transfers simulated
  double wall_s = 0;                         // host time the simulation took
  std::string plan;                          // the policy's plan on rank 0 at the end
};

// Runs the simulation (once per process: SimGrid's engine is a singleton). `progress(step)` is called by rank 0
// after each simulated step. The engine writes its rows (/sync_events, /layer_ready, /events, /decisions) to
// `metrics` when given (rank 0's; every rank's sync events with all_rank_events). Throws dd::UsageError for inputs
// the simulation refuses (policy needing signals without constant_signals, a platform file with too few hosts, an
// unknown SimGrid option...).
SimResult simulate(const SimLayers& layers, const PlatformSpec& platform, const SimOptions& opt,
                   const std::function<void(int64_t)>& progress, telemetry::MetricsWriter* metrics = nullptr);

// Throws dd::UsageError naming `what` when `ranks` simulated ranks need more memory mappings for their actors'
// stacks than this kernel allows (vm.max_map_count), which SimGrid would abort on after minutes of set-up. The
// caller checks a --cluster world before it writes anything; simulate() checks a --platform file's hosts itself.
void check_actor_budget(int ranks, const std::string& what);

// False when built without SimGrid (simulate then throws dd::UsageError saying so).
bool have_simgrid();

}  // namespace dd::sim
