// MetricsWriter: buffers run metrics in memory and publishes OUT/metrics.h5 as atomic snapshots (crash-safe).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/telemetry/rows.h"

namespace dd::telemetry {

struct MetricsWriterOptions {
  double flush_interval_s = 2.0;  // how often the background thread publishes a snapshot
  bool overwrite = false;         // replace an existing file instead of refusing (dd::UsageError)
  bool background = true;         // false: flush only on flush()/close() (tests, tools)
  // >= 0: continue the metrics.h5 of a run resumed from a checkpoint taken after this step (see constructor).
  int64_t resume_after_step = -1;
};

// What the flusher has done so far; rows_* count rows that are durably in the published file.
struct FlushStats {
  int64_t flushes = 0;
  int64_t steps = 0;
  int64_t sync_events = 0;
  int64_t layer_ready = 0;
  int64_t eval = 0;
  int64_t events = 0;
  int64_t file_bytes = 0;
  double last_flush_s = 0;   // duration of the last flush (HDF5 writes + snapshot)
};

// Writes the metrics.h5 schema of analysis/README.md.
//
// Crash safety: the HDF5 file lives in memory (core driver); each flush appends the buffered rows to it, then
// writes its image to PATH.tmp and renames it over PATH. rename() is atomic, so whatever instant the process
// dies (SIGKILL included), PATH is a complete, closed-format HDF5 file holding every row up to the last flush,
// readable by plain h5py/h5dump (unlike SWMR files, which need h5clear after a crash). The price is that one
// flush writes the whole file; the interval stretches automatically so flushing stays under ~2% of one thread.
//
// Threading: append_* / set_* may be called from any thread; they only lock a mutex and copy the row
// (no HDF5 call on the hot path). All HDF5 work happens on the flush thread or in flush()/close().
//
// The parts, one job each: row_buffers.h (what append_* fills), metrics_schema.h (the tables and datasets in
// the in-memory file), snapshot_publisher.h (atomic publication, the flush thread), resume_merge.h (what a
// resumed run keeps of the old file).
class MetricsWriter {
 public:
  // Creates PATH (and publishes an empty-schema file immediately, so an early crash still leaves a file).
  // Throws dd::UsageError if PATH exists and !opts.overwrite, or if its directory is not writable.
  //
  // Resume (opts.resume_after_step = S >= 0) and PATH exists: the file is read and continued instead, whatever
  // opts.overwrite says. Kept: every root attribute (later set_* calls replace values as usual), /layers, the
  // rows of /steps, /sync_events, /eval, /layer_ready, /events with step <= S, and the sensitivity probes that
  // were complete by S (t0 + max(delays) <= S; their kind counts as declared). Rows the interrupted run
  // published after S are dropped, so the resumed run appends S+1.. without duplicates. An /events row
  // {S, "resume", "after step S"} is appended (detail gains "; steps A..S missing ..." when the old file
  // stops before S), and the merged file is published before the constructor returns.
  // A PATH that is not a readable metrics.h5 of this schema version -> dd::UsageError naming it.
  // Resume and PATH absent: a fresh file, plus the event {S, "resume", "after step S (no earlier metrics file)"}.
  explicit MetricsWriter(std::string path, MetricsWriterOptions opts = {});
  ~MetricsWriter();  // close(); errors are reported on stderr, never thrown
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Root attributes; a later value for the same key replaces the earlier one.
  void set_attributes(const std::map<std::string, std::string>& config);
  void set_attribute(const std::string& key, AttrValue value);
  // An attribute of the /decisions group (docs/design.md, HDF5): what the engine decided from a measurement, as
  // JSON text; a later value for the same key replaces the earlier one.
  void set_decision(const std::string& key, std::string json);

  // The /layers table (replaces any earlier one).
  void write_layers(const std::vector<LayerInfo>& layers);

  void append_step(const StepRow& row);
  void append_sync_event(const SyncEventRow& row);
  void append_eval(const EvalRow& row);
  void append_layer_ready(const LayerReadyRow& row);
  void append_event(int64_t step, std::string kind, std::string detail);

  // Sensitivity probe. declare_sensitivity fixes the [layer, delay] shape of one probe kind; declaring it again
  // with the same shape is a no-op (a resumed run re-declares the kinds it imported), a different shape throws
  // std::invalid_argument, or dd::UsageError when the first declaration came from the resumed file;
  // record_cosine stores cos(g_l(t0), g_l(t0+delay)) for every layer; a probe row is written once all its
  // delays are in (or at close, with NaN for delays that never came).
  void declare_sensitivity(ProbeKind kind, std::vector<int32_t> delays, int32_t num_layers);
  void record_cosine(ProbeKind kind, int64_t probe_step, int32_t delay, const std::vector<float>& per_layer);

  void flush();  // synchronous: everything appended so far is in the published file when this returns
  void close();  // final flush; stops the thread. Rethrows a background flush failure, if any.

  FlushStats stats() const;
  const std::string& path() const { return path_; }

 private:
  struct Impl;  // row buffers, the in-memory file, the flush thread (metrics_writer.cpp)
  void flush_now();  // requires Impl::hdf5_mutex

  std::string path_;
  MetricsWriterOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dd::telemetry
