// One simulated rank: train's step loop (core/train/step.h) driving the real sync engine (make_layer_sync) on
// SimGrid stand-ins: a compute that sleeps the profile's times, a SimBackend, and arenas that hold sizes only.
// Runs inside that rank's SimGrid actor.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "app/sim/sim_backend.h"
#include "app/sim/sim_layers.h"
#include "app/sim/simulator.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/policy/policy_spec.h"
#include "core/sync/types/data_path.h"

namespace dd::sim {

// What every rank shares.
struct SimRun {
  const SimLayers* layers = nullptr;
  const SimOptions* o = nullptr;
  sync::PolicySpec policy;                  // o->policy and o->switches, parsed once
  std::vector<sync::PolicySwitch> switches;
  SimNet net;
  sync::LayerTable table;
  sync::Arenas arenas;                      // one set of never-read arenas for every rank (sizes_only_arenas)
  float* scratch = nullptr;                 // in the same region
  std::vector<std::string> nodes;           // rank -> node name (hier nodes=auto groups by it)
  std::map<int, double> slow;               // rank -> compute factor
  telemetry::MetricsWriter* metrics = nullptr;
  const std::function<void(int64_t)>* progress = nullptr;
  SimResult* res = nullptr;
  double last_end = 0;
  std::exception_ptr error;                 // the first rank's failure (the simulation then stops)
  int finished = 0;                         // ranks whose run ended
};

// Arenas of the layers' sizes in one lazily mapped region: pages the engine never touches (collectives move no
// data here, gradient signals are constant) cost no memory, so 1024 ranks of a 124 M-parameter model need none.
// Transformed averages (outer=, compress=) read the zero parameters; their per-rank anchors are the only copies.
// `net` learns the region (collectives there move no data); *scratch is a scratch buffer of kScratchFloats inside it.
constexpr int64_t kScratchFloats = int64_t(1) << 22;
sync::Arenas sizes_only_arenas(const SimLayers& layers, int opt_slots, SimNet& net, float** scratch);

// The rank's whole run: engine construction, opt.steps steps, finalize. Rank 0 fills res->steps and the timings.
void run_rank(SimRun& run, int rank);

}  // namespace dd::sim
