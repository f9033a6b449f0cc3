// Reads an existing metrics.h5 back into rows, keeping only what a run resumed after step S may keep.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/telemetry/rows.h"

namespace dd::telemetry {

// One probe kind's /sensitivity datasets, filtered to the probes that were complete at the resume point.
struct ImportedProbes {
  bool present = false;          // the file declared this kind (its datasets exist, maybe with 0 rows)
  std::vector<int32_t> delays;   // /sensitivity/delays[_minibatch]
  int32_t num_layers = 0;        // cosine's layer extent
  std::vector<int64_t> steps;    // kept probe_steps, file order
  std::vector<float> values;     // kept cosine rows, [probe][layer][delay]
  int64_t dropped = 0;           // probe rows whose t0 + max(delay) > S
};

// Everything a resumed MetricsWriter takes over from the file it continues.
struct ImportedRun {
  std::map<std::string, AttrValue> attrs;  // every root attribute the writer can represent
  std::vector<LayerInfo> layers;
  std::vector<StepRow> steps;  // rows with step <= S, in file order (likewise below)
  std::vector<SyncEventRow> sync_events;
  std::vector<EvalRow> evals;
  std::vector<LayerReadyRow> layer_ready;
  std::vector<EventRow> events;
  std::map<std::string, std::string> decisions;  // /decisions attributes decided by step S (their "decided_at")
  ImportedProbes probes[2];  // indexed by ProbeKind
  int64_t last_step = -1;    // largest kept /steps.step (-1: none); < S means the old run never flushed S
  int64_t dropped_rows = 0;  // table rows with step > S (all tables together)
};

// Opens PATH read-only and imports rows with step <= after_step (probes: t0 + max(delays) <= after_step).
// Throws dd::UsageError naming PATH when it is not a readable metrics.h5 of this schema version.
ImportedRun import_metrics(const std::string& path, int64_t after_step);

// The /decisions attributes of a metrics.h5 (JSON text each; empty when the run recorded none). Throws
// dd::UsageError naming PATH when it is not a readable metrics.h5.
std::map<std::string, std::string> read_decisions(const std::string& path);

}  // namespace dd::telemetry
