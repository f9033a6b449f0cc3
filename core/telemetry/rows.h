// Plain row types appended to metrics.h5 tables; their fields are the HDF5 column names (analysis/README.md).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace dd::telemetry {

// What one collective did. Stored as an HDF5 enum (int8) whose names are sync_action_name().
enum class SyncAction : int8_t {
  kNone = 0,            // placeholder; never expected in a file written by training
  kAverageParams = 1,   // local layer: parameters (and BN buffers) averaged across the group
  kAllreduceGrads = 2,  // lock-step layer: gradients averaged before the update
  kControl = 3,         // small control all-reduce (policy votes)
  kBroadcast = 4,       // e.g. initial parameter broadcast
};
const char* sync_action_name(SyncAction a);

// Sensitivity probe flavour: fixed probe batch (staleness only) or training minibatch (noise included).
enum class ProbeKind { kFixedBatch, kMinibatch };

// A root attribute value: typed, so h5py returns int/float/str/list rather than strings for everything.
using AttrValue = std::variant<std::string, int64_t, double, std::vector<std::string>>;

struct LayerInfo {
  int32_t index = 0;  // forward order
  std::string name;   // e.g. "blocks.0.attn.qkv"
  std::string kind;   // Linear, Conv, BatchNorm, LayerNorm, Embedding
  int64_t params = 0;
  int64_t bytes = 0;
};

// One training step (rank 0's view). Times in ms except wall_time_s (seconds since training start).
struct StepRow {
  int64_t step = 0;
  double wall_time_s = 0;
  double loss = 0;
  double lr = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double update_ms = 0;
  double exposed_comm_ms = 0;  // time the compute thread waited for communication
  int64_t bytes_sent = 0;      // payload bytes of this rank's collectives in this step
  double samples_per_s = 0;    // global (all ranks) samples per second for this step
};

// One collective. launch_s/end_s are seconds since this step's backward start on `rank`.
struct SyncEventRow {
  int64_t step = 0;
  int32_t first_layer = 0;  // forward indices; a bucket spans [first_layer, last_layer]
  int32_t last_layer = 0;
  SyncAction action = SyncAction::kNone;
  int32_t group = 0;  // 0 = all ranks; hier policies number their sub-groups from 1
  int32_t rank = 0;   // which rank measured it (rank 0 unless per-rank timing is gathered)
  int64_t bytes = 0;
  double launch_s = 0;
  double end_s = 0;
};

// Test-set evaluation; NaN in the columns that do not apply (accuracy for LMs, perplexity for classifiers).
struct EvalRow {
  int64_t step = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  double perplexity = 0;
};

// When layer `layer`'s backward finished, seconds since the step's backward start (overlap timeline).
struct LayerReadyRow {
  int64_t step = 0;
  int32_t rank = 0;
  int32_t layer = 0;
  double ready_s = 0;
};

// Free-form run event: policy switch, anomaly, fallback, checkpoint.
struct EventRow {
  int64_t step = 0;
  std::string kind;
  std::string detail;
};

// One probe kind's share of a flush: the datasets to create (first flush after the declaration) and the
// finished probe rows, [probe][layer][delay].
struct ProbeBatch {
  bool create = false;
  std::vector<int32_t> delays;
  int32_t num_layers = 0;
  std::vector<int64_t> steps;
  std::vector<float> values;
};

// What one flush writes: everything appended since the previous flush (RowBuffers::drain, MetricsFile::write).
struct RowBatch {
  std::map<std::string, AttrValue> attrs;
  std::map<std::string, std::string> decisions;  // attributes of /decisions (JSON text), replacing earlier values
  bool layers_dirty = false;  // /layers is rewritten (with `layers`) only when set
  std::vector<LayerInfo> layers;
  std::vector<StepRow> steps;
  std::vector<SyncEventRow> sync_events;
  std::vector<EvalRow> evals;
  std::vector<LayerReadyRow> layer_ready;
  std::vector<EventRow> events;
  ProbeBatch probes[2];  // indexed by ProbeKind
};

}  // namespace dd::telemetry
