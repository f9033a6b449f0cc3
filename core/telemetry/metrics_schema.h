// The metrics.h5 schema (analysis/README.md) on an HDF5 file held in memory (core driver): the six tables, the
// /sensitivity datasets and the root attributes. A flush writes a RowBatch into it and takes the file image.
// Not thread-safe: MetricsWriter serializes every call.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/telemetry/hdf5_handle.h"
#include "core/telemetry/rows.h"

namespace dd::telemetry {

// Rows in each table so far (what FlushStats reports).
struct TableRows {
  int64_t steps = 0, sync_events = 0, layer_ready = 0, eval = 0, events = 0;
};

class MetricsFile {
 public:
  // Creates the in-memory file (named `path`, never written there: see image()) with its empty tables.
  explicit MetricsFile(const std::string& path);

  // Root attributes (replacing earlier values), /layers (rewritten when batch.layers_dirty), the rows appended
  // to each table, and the sensitivity datasets (created on the batch that says so) with their new probe rows.
  void write(const RowBatch& batch);

  // Flushes the file and returns its complete image (the bytes of a closed-format HDF5 file).
  const std::vector<char>& image();
  TableRows rows() const;

  // Releases every HDF5 object and the file; nothing may be called afterwards.
  void close();

 private:
  // One extendable 1-D table of compound rows.
  struct Table {
    Hid ds;
    Hid mem;
    hsize_t rows = 0;
  };
  // One probe kind's datasets.
  struct Probes {
    Hid cosine, probe_steps;
    hsize_t rows = 0;
  };
  static Table create_table(hid_t loc, const char* name, Hid mem_type);
  static void write_rows(Table& t, hsize_t from, const void* data, size_t n);
  static void append_rows(Table& t, const void* data, size_t n);
  void create_probes(int kind, const ProbeBatch& b);
  void append_probes(int kind, const ProbeBatch& b);

  Hid file_;
  Table layers_, steps_, sync_, eval_, ready_, events_;
  Hid g_sens_;
  Hid g_dec_;  // /decisions, created by the first batch that has one
  Probes probes_[2];  // indexed by ProbeKind
  std::vector<char> image_;
};

}  // namespace dd::telemetry
