// A simulated run on disk in the schema of `train`: OUT/metrics.h5 (root attributes, /layers, /steps,
// /sync_events, /layer_ready) through core/telemetry's writer, and OUT/summary.json.
#pragma once
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/sim/simulator.h"
#include "core/telemetry/metrics_writer.h"

namespace dd::sim {

// The summary (also the CLI's last JSON line): step_ms, samples_per_s (batch > 0), exposed_comm_fraction,
// comm_bytes, world, and what ran.
nlohmann::ordered_json summarize(const SimResult& r, const SimLayers& layers, const SimOptions& o,
                                 const std::string& profile);

// Opens OUT/metrics.h5 before the simulation (the engine writes its rows into it as it runs) with the run's
// options as root attributes (`attrs`, CLI names) and the layer table.
std::unique_ptr<telemetry::MetricsWriter> open_run(const std::string& out, const SimLayers& layers,
                                                   const SimOptions& o, const std::map<std::string, std::string>& attrs);
// After it: /steps, the world's attributes, then OUT/summary.json.
void finish_run(telemetry::MetricsWriter& w, const std::string& out, const SimResult& r,
                const nlohmann::ordered_json& summary);

}  // namespace dd::sim
