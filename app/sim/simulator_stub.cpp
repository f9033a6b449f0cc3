// Built without SimGrid (no pkg-config `simgrid`): `dreamddp simulate` refuses with one line.
#include "base/error.h"
#include "app/sim/simulator.h"

namespace dd::sim {

bool have_simgrid() { return false; }

void check_actor_budget(int, const std::string&) {}  // simulate() refuses anyway

SimResult simulate(const SimLayers&, const PlatformSpec&, const SimOptions&, const std::function<void(int64_t)>&,
                   telemetry::MetricsWriter*) {
  throw UsageError("this dreamddp was built without SimGrid (install libsimgrid-dev, `make deps`, and rebuild)");
}

}  // namespace dd::sim
