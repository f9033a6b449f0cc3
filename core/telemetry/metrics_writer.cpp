// MetricsWriter: ties the row buffers, the in-memory HDF5 file and the snapshot publisher together; a flush
// drains the buffers into the file and publishes its image.
#include "core/telemetry/metrics_writer.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <mutex>
#include <stdexcept>

#include "base/clock.h"
#include "base/error.h"
#include "core/telemetry/hdf5_types.h"
#include "core/telemetry/metrics_schema.h"
#include "core/telemetry/resume_merge.h"
#include "core/telemetry/row_buffers.h"
#include "core/telemetry/snapshot_publisher.h"

namespace dd::telemetry {

struct MetricsWriter::Impl {
  RowBuffers buffers;

  std::mutex hdf5_mutex;  // serializes all HDF5 access (flush thread, flush(), close())
  std::unique_ptr<MetricsFile> file;

  mutable std::mutex stats_mutex;
  FlushStats stats;

  std::mutex state_mutex;  // guards closed
  bool closed = false;
  std::unique_ptr<FlushThread> thread;  // last: stopped before anything it flushes goes
};

MetricsWriter::MetricsWriter(std::string path, MetricsWriterOptions opts)
    : path_(std::move(path)), opts_(opts), impl_(std::make_unique<Impl>()) {
  if (!(opts_.flush_interval_s > 0))
    throw dd::UsageError("metrics flush interval must be > 0 s, got " + std::to_string(opts_.flush_interval_s));
  struct stat st {};
  const bool resume = opts_.resume_after_step >= 0;
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (!opts_.overwrite && !resume && exists)
    throw dd::UsageError("metrics file " + path_ + " already exists; choose another output or allow overwrite");

  Impl& m = *impl_;
  m.buffers.set_attribute("telemetry_schema_version", kSchemaVersion);
  m.buffers.set_attribute("created_unix_s", static_cast<double>(std::time(nullptr)));
  // Read everything before the in-memory file is created: a failure leaves the old file untouched.
  if (resume) m.buffers.seed(resumed_run(path_, opts_.resume_after_step, exists), path_);

  m.file = std::make_unique<MetricsFile>(path_);
  {
    std::lock_guard<std::mutex> lk(m.hdf5_mutex);
    flush_now();  // publishes the empty schema (or the merged resumed file) now; proves the dir is writable
  }
  if (opts_.background)
    m.thread = std::make_unique<FlushThread>(
        opts_.flush_interval_s,
        [this] {
          std::lock_guard<std::mutex> h(impl_->hdf5_mutex);
          flush_now();
        },
        [this] { return stats().last_flush_s; }, path_);
}

MetricsWriter::~MetricsWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metrics: closing %s failed: %s\n", path_.c_str(), e.what());
  }
}

void MetricsWriter::set_attributes(const std::map<std::string, std::string>& config) {
  impl_->buffers.set_attributes(config);
}
void MetricsWriter::set_attribute(const std::string& key, AttrValue value) {
  impl_->buffers.set_attribute(key, std::move(value));
}
void MetricsWriter::set_decision(const std::string& key, std::string json) {
  impl_->buffers.set_decision(key, std::move(json));
}
void MetricsWriter::write_layers(const std::vector<LayerInfo>& layers) { impl_->buffers.write_layers(layers); }
void MetricsWriter::append_step(const StepRow& row) { impl_->buffers.append_step(row); }
void MetricsWriter::append_sync_event(const SyncEventRow& row) { impl_->buffers.append_sync_event(row); }
void MetricsWriter::append_eval(const EvalRow& row) { impl_->buffers.append_eval(row); }
void MetricsWriter::append_layer_ready(const LayerReadyRow& row) { impl_->buffers.append_layer_ready(row); }
void MetricsWriter::append_event(int64_t step, std::string kind, std::string detail) {
  impl_->buffers.append_event(EventRow{step, std::move(kind), std::move(detail)});
}
void MetricsWriter::declare_sensitivity(ProbeKind kind, std::vector<int32_t> delays, int32_t num_layers) {
  impl_->buffers.declare_sensitivity(kind, std::move(delays), num_layers);
}
void MetricsWriter::record_cosine(ProbeKind kind, int64_t probe_step, int32_t delay,
                                  const std::vector<float>& per_layer) {
  impl_->buffers.record_cosine(kind, probe_step, delay, per_layer);
}

void MetricsWriter::flush_now() {
  Impl& m = *impl_;
  double t0 = dd::now_s();
  // Drain the producer buffers quickly; the HDF5 work below runs without blocking appenders.
  m.file->write(m.buffers.drain());
  const std::vector<char>& image = m.file->image();
  publish_atomically(path_, image);

  const TableRows rows = m.file->rows();
  std::lock_guard<std::mutex> lk(m.stats_mutex);
  m.stats.flushes++;
  m.stats.steps = rows.steps;
  m.stats.sync_events = rows.sync_events;
  m.stats.layer_ready = rows.layer_ready;
  m.stats.eval = rows.eval;
  m.stats.events = rows.events;
  m.stats.file_bytes = static_cast<int64_t>(image.size());
  m.stats.last_flush_s = dd::now_s() - t0;
}

void MetricsWriter::flush() {
  {
    std::lock_guard<std::mutex> lk(impl_->state_mutex);
    if (impl_->thread && impl_->thread->error()) std::rethrow_exception(impl_->thread->error());
    if (impl_->closed) throw std::logic_error("MetricsWriter::flush after close");
  }
  std::lock_guard<std::mutex> h(impl_->hdf5_mutex);
  flush_now();
}

void MetricsWriter::close() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.state_mutex);
    if (m.closed) return;
    m.closed = true;
  }
  if (m.thread) {
    m.thread->stop();
    if (std::exception_ptr e = m.thread->error()) {
      m.file->close();
      std::rethrow_exception(e);
    }
  }
  m.buffers.finish_open_probes();  // probes whose later delays never came (run ended) are kept, NaN where missing
  std::lock_guard<std::mutex> h(m.hdf5_mutex);
  flush_now();
  m.file->close();
}

FlushStats MetricsWriter::stats() const {
  std::lock_guard<std::mutex> lk(impl_->stats_mutex);
  return impl_->stats;
}

}  // namespace dd::telemetry
