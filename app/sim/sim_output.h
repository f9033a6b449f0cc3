// A simulated run on disk in the schema of `train`: OUT/metrics.h5 (root attributes, /layers, /steps,
// /sync_events, /layer_ready) through core/telemetry's writer, and OUT/summary.json.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "app/sim/simulator.h"

namespace dd::sim {

// The summary (also the CLI's last JSON line): step_ms, samples_per_s (batch > 0), exposed_comm_fraction,
// comm_bytes, world, and what ran.
nlohmann::ordered_json summarize(const SimResult& r, const SimLayers& layers, const SimOptions& o,
                                 const std::string& profile);

// Writes OUT/metrics.h5 and OUT/summary.json; `attrs` are the run's options (root attributes, CLI names).
void write_run(const std::string& out, bool overwrite, const SimResult& r, const SimLayers& layers,
               const std::map<std::string, std::string>& attrs, const nlohmann::ordered_json& summary);

}  // namespace dd::sim
