// The producer side of MetricsWriter: rows, attributes and sensitivity probes buffered in memory under one mutex
// until the next flush drains them. No HDF5 here, so appending from the training loop costs a lock and a copy.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/telemetry/metrics_import.h"
#include "core/telemetry/rows.h"

namespace dd::telemetry {

class RowBuffers {
 public:
  // Continues a resumed run: `run`'s attributes replace ours, its layers, rows and probes are the first to be
  // written; its probe kinds count as declared by the file `from` (named in a shape-mismatch error).
  void seed(ImportedRun&& run, const std::string& from);

  void set_attributes(const std::map<std::string, std::string>& config);
  void set_attribute(const std::string& key, AttrValue value);
  void set_decision(const std::string& key, std::string json);
  void write_layers(const std::vector<LayerInfo>& layers);
  void append_step(const StepRow& row);
  void append_sync_event(const SyncEventRow& row);
  void append_eval(const EvalRow& row);
  void append_layer_ready(const LayerReadyRow& row);
  void append_event(EventRow row);

  // As MetricsWriter::declare_sensitivity / record_cosine (metrics_writer.h).
  void declare_sensitivity(ProbeKind kind, std::vector<int32_t> delays, int32_t num_layers);
  void record_cosine(ProbeKind kind, int64_t probe_step, int32_t delay, const std::vector<float>& per_layer);
  // Moves probes still waiting for delays to the finished rows (NaN where a delay never came): the run ended.
  void finish_open_probes();

  // Takes everything buffered since the last drain; the buffers are empty afterwards.
  RowBatch drain();

 private:
  // Per probe kind: declared shape, probes waiting for delays, finished rows waiting for the next flush.
  struct Sensitivity {
    bool declared = false;
    bool created = false;       // its datasets were handed to a flush for creation
    std::string imported_from;  // non-empty: declared by the file a resumed writer continues
    std::vector<int32_t> delays;
    int32_t num_layers = 0;
    struct Probe {
      std::vector<float> values;  // [layer][delay]
      std::vector<char> have;     // per delay
      size_t n_have = 0;
    };
    std::map<int64_t, Probe> in_flight;
    std::vector<int64_t> done_steps;
    std::vector<float> done_values;
  };

  std::mutex mutex_;
  RowBatch pending_;  // probes excluded: they are in sens_ until drained
  Sensitivity sens_[2];
};

}  // namespace dd::telemetry
