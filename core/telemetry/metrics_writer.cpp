// MetricsWriter: in-memory HDF5 file (core driver) + periodic atomic snapshots to metrics.h5 from a flush thread.
#include "core/telemetry/metrics_writer.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <stdexcept>

#include "core/common/clock.h"
#include "core/common/error.h"
#include "core/telemetry/hdf5_handle.h"
#include "core/telemetry/hdf5_types.h"
#include "core/telemetry/metrics_import.h"

namespace dd::telemetry {
namespace {

// A flush may take at most this fraction of wall time; larger files get a longer interval.
constexpr double kMaxFlushDutyCycle = 0.02;

// One extendable 1-D table of compound rows.
struct Table {
  Hid ds;
  Hid mem;
  hsize_t rows = 0;
};

Table create_table(hid_t loc, const char* name, Hid mem_type) {
  Table t;
  t.mem = std::move(mem_type);
  Hid file_type = packed_copy(t.mem);
  hsize_t dims = 0, maxdims = H5S_UNLIMITED;
  Hid space(h5check(H5Screate_simple(1, &dims, &maxdims), std::string("H5Screate_simple ") + name));
  Hid dcpl(h5check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate dcpl"));
  // ~64 KiB chunks: large enough that a long run is a few thousand chunks, small enough for tiny runs.
  hsize_t chunk = std::max<hsize_t>(64, (64 * 1024) / H5Tget_size(file_type));
  h5check_status(H5Pset_chunk(dcpl, 1, &chunk), "H5Pset_chunk");
  t.ds = Hid(h5check(H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                     std::string("H5Dcreate2 ") + name));
  return t;
}

// Writes n rows at [from, from+n), growing or shrinking the table to from+n rows.
void write_rows(Table& t, hsize_t from, const void* data, size_t n) {
  hsize_t total = from + n;
  if (total != t.rows) h5check_status(H5Dset_extent(t.ds, &total), "H5Dset_extent");
  t.rows = total;
  if (n == 0) return;
  Hid fspace(h5check(H5Dget_space(t.ds), "H5Dget_space"));
  hsize_t count = n;
  h5check_status(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &from, nullptr, &count, nullptr), "select");
  Hid mspace(h5check(H5Screate_simple(1, &count, nullptr), "H5Screate_simple"));
  h5check_status(H5Dwrite(t.ds, t.mem, mspace, fspace, H5P_DEFAULT, data), "H5Dwrite");
}

void append_rows(Table& t, const void* data, size_t n) {
  if (n) write_rows(t, t.rows, data, n);
}

void write_attribute(hid_t obj, const std::string& key, const AttrValue& value) {
  if (H5Aexists(obj, key.c_str()) > 0) h5check_status(H5Adelete(obj, key.c_str()), "H5Adelete " + key);
  Hid type, space;
  std::vector<const char*> strs;
  const void* buf = nullptr;
  if (auto* s = std::get_if<std::string>(&value)) {
    type = vlen_string_type();
    space = Hid(h5check(H5Screate(H5S_SCALAR), "H5Screate"));
    strs = {s->c_str()};
    buf = strs.data();
  } else if (auto* i = std::get_if<int64_t>(&value)) {
    type = Hid(h5check(H5Tcopy(H5T_NATIVE_INT64), "H5Tcopy"));
    space = Hid(h5check(H5Screate(H5S_SCALAR), "H5Screate"));
    buf = i;
  } else if (auto* d = std::get_if<double>(&value)) {
    type = Hid(h5check(H5Tcopy(H5T_NATIVE_DOUBLE), "H5Tcopy"));
    space = Hid(h5check(H5Screate(H5S_SCALAR), "H5Screate"));
    buf = d;
  } else {
    const auto& list = std::get<std::vector<std::string>>(value);
    type = vlen_string_type();
    hsize_t n = list.size();
    space = Hid(h5check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"));
    for (const auto& s : list) strs.push_back(s.c_str());
    buf = strs.data();
  }
  Hid attr(h5check(H5Acreate2(obj, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2 " + key));
  h5check_status(H5Awrite(attr, type, buf), "H5Awrite " + key);
}

const char* probe_suffix(ProbeKind k) { return k == ProbeKind::kMinibatch ? "_minibatch" : ""; }

std::string shape_text(const std::vector<int32_t>& delays, int32_t num_layers) {
  std::string d;
  for (int32_t x : delays) d += (d.empty() ? "" : ",") + std::to_string(x);
  return "delays=" + d + " over " + std::to_string(num_layers) + " layers";
}

// Writes all bytes to PATH.tmp and renames it over PATH: readers see the old or the new file, never a mix.
void publish_atomically(const std::string& path, const std::vector<char>& bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw dd::UsageError("cannot write metrics file " + tmp + ": " + std::strerror(errno) +
                         " (is the output directory writable?)");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("writing " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) throw std::runtime_error("closing " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("renaming " + tmp + " to " + path + ": " + std::strerror(errno));
}

}  // namespace

// Per probe kind: declared shape, probes waiting for delays, finished rows waiting for the next flush.
struct SensitivityState {
  bool declared = false;
  bool created = false;
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
  // HDF5 side (flush thread only)
  Hid cosine, probe_steps;
  hsize_t rows = 0;
};

struct MetricsWriter::Impl {
  // --- written by producers under buf_mutex, drained by flush_now()
  std::mutex buf_mutex;
  std::map<std::string, AttrValue> attrs;
  bool layers_dirty = false;
  std::vector<LayerInfo> layers;
  std::vector<StepRow> steps;
  std::vector<SyncEventRow> sync_events;
  std::vector<EvalRow> evals;
  std::vector<LayerReadyRow> layer_ready;
  std::vector<EventRow> events;
  SensitivityState sens[2];

  // --- HDF5 side, touched only under hdf5_mutex
  Hid file;
  Table t_layers, t_steps, t_sync, t_eval, t_ready, t_events;
  Hid g_sens;
  std::vector<char> image;

  mutable std::mutex stats_mutex;
  FlushStats stats;
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
  m.attrs["telemetry_schema_version"] = kSchemaVersion;
  m.attrs["created_unix_s"] = static_cast<double>(std::time(nullptr));
  if (resume) {
    // Read everything before the in-memory file is created: a failure leaves the old file untouched.
    const int64_t s = opts_.resume_after_step;
    std::string detail = "after step " + std::to_string(s);
    if (exists) {
      ImportedRun run = import_metrics(path_, s);
      for (auto& [k, v] : run.attrs) m.attrs[k] = std::move(v);  // created_unix_s stays the first run's
      m.layers = std::move(run.layers);
      m.layers_dirty = !m.layers.empty();
      m.steps = std::move(run.steps);
      m.sync_events = std::move(run.sync_events);
      m.evals = std::move(run.evals);
      m.layer_ready = std::move(run.layer_ready);
      m.events = std::move(run.events);
      for (int k = 0; k < 2; ++k) {
        ImportedProbes& p = run.probes[k];
        if (!p.present) continue;
        SensitivityState& st_k = m.sens[k];
        st_k.declared = true;
        st_k.imported_from = path_;
        st_k.delays = std::move(p.delays);
        st_k.num_layers = p.num_layers;
        st_k.done_steps = std::move(p.steps);
        st_k.done_values = std::move(p.values);
      }
      // Rows the old run never flushed cannot be recovered; say so in the file rather than hide the gap.
      if (run.last_step < s) {
        std::string gap = "steps " + std::to_string(run.last_step + 1) + ".." + std::to_string(s) +
                          " missing (never flushed by the interrupted run)";
        detail += "; " + gap;
        std::fprintf(stderr, "metrics: resuming %s after step %lld: %s\n", path_.c_str(),
                     static_cast<long long>(s), gap.c_str());
      }
    } else {
      detail += " (no earlier metrics file)";
    }
    m.events.push_back(EventRow{s, "resume", std::move(detail)});
  }

  Hid fapl(h5check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate fapl"));
  // The file lives in memory and is published by snapshot; nothing is written in place (crash safety).
  h5check_status(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  // 1.8-compatible format: no superblock "open for write" flags, so any h5py/h5dump reads the snapshots.
  h5check_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  m.file = Hid(h5check(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate " + path_));

  m.t_layers = create_table(m.file, "layers", layer_mem_type());
  m.t_steps = create_table(m.file, "steps", step_mem_type());
  m.t_sync = create_table(m.file, "sync_events", sync_event_mem_type());
  m.t_eval = create_table(m.file, "eval", eval_mem_type());
  m.t_ready = create_table(m.file, "layer_ready", layer_ready_mem_type());
  m.t_events = create_table(m.file, "events", event_mem_type());
  write_attribute(m.t_sync.ds, "launch_end_reference", std::string("seconds since the step's backward start"));
  write_attribute(m.t_ready.ds, "ready_reference", std::string("seconds since the step's backward start"));

  {
    std::lock_guard<std::mutex> lk(hdf5_mutex_);
    flush_now();  // publishes the empty schema (or the merged resumed file) now; proves the dir is writable
  }
  if (opts_.background) thread_ = std::thread([this] { flush_thread_main(); });
}

MetricsWriter::~MetricsWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metrics: closing %s failed: %s\n", path_.c_str(), e.what());
  }
}

void MetricsWriter::set_attributes(const std::map<std::string, std::string>& config) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  for (const auto& [k, v] : config) impl_->attrs[k] = v;
}

void MetricsWriter::set_attribute(const std::string& key, AttrValue value) {
  if (key.empty()) throw std::invalid_argument("metrics attribute key must not be empty");
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->attrs[key] = std::move(value);
}

void MetricsWriter::write_layers(const std::vector<LayerInfo>& layers) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->layers = layers;
  impl_->layers_dirty = true;
}

void MetricsWriter::append_step(const StepRow& row) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->steps.push_back(row);
}

void MetricsWriter::append_sync_event(const SyncEventRow& row) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->sync_events.push_back(row);
}

void MetricsWriter::append_eval(const EvalRow& row) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->evals.push_back(row);
}

void MetricsWriter::append_layer_ready(const LayerReadyRow& row) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->layer_ready.push_back(row);
}

void MetricsWriter::append_event(int64_t step, std::string kind, std::string detail) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  impl_->events.push_back(EventRow{step, std::move(kind), std::move(detail)});
}

void MetricsWriter::declare_sensitivity(ProbeKind kind, std::vector<int32_t> delays, int32_t num_layers) {
  if (delays.empty() || num_layers <= 0)
    throw std::invalid_argument("declare_sensitivity needs at least one delay and one layer");
  for (size_t i = 0; i < delays.size(); ++i)
    if (delays[i] <= 0 || (i && delays[i] <= delays[i - 1]))
      throw std::invalid_argument("sensitivity delays must be positive and increasing");
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  SensitivityState& s = impl_->sens[static_cast<int>(kind)];
  if (s.declared) {
    if (s.delays == delays && s.num_layers == num_layers) return;
    if (!s.imported_from.empty())
      throw dd::UsageError("resumed metrics file " + s.imported_from + " holds " +
                           std::string(kind == ProbeKind::kMinibatch ? "minibatch" : "fixed-batch") +
                           " sensitivity probes with " + shape_text(s.delays, s.num_layers) +
                           ", but this run declares " + shape_text(delays, num_layers) +
                           "; resume with the same --sensitivity delays and model");
    throw std::invalid_argument("sensitivity already declared with a different [layer, delay] shape");
  }
  s.declared = true;
  s.delays = std::move(delays);
  s.num_layers = num_layers;
}

void MetricsWriter::record_cosine(ProbeKind kind, int64_t probe_step, int32_t delay,
                                  const std::vector<float>& per_layer) {
  std::lock_guard<std::mutex> lk(impl_->buf_mutex);
  SensitivityState& s = impl_->sens[static_cast<int>(kind)];
  if (!s.declared) throw std::invalid_argument("record_cosine before declare_sensitivity");
  if (per_layer.size() != static_cast<size_t>(s.num_layers))
    throw std::invalid_argument("record_cosine: got " + std::to_string(per_layer.size()) + " layers, declared " +
                                std::to_string(s.num_layers));
  auto it = std::find(s.delays.begin(), s.delays.end(), delay);
  if (it == s.delays.end()) throw std::invalid_argument("record_cosine: undeclared delay " + std::to_string(delay));
  size_t di = static_cast<size_t>(it - s.delays.begin()), nd = s.delays.size();
  auto& p = s.in_flight[probe_step];
  if (p.values.empty()) {
    p.values.assign(per_layer.size() * nd, std::numeric_limits<float>::quiet_NaN());
    p.have.assign(nd, 0);
  }
  for (size_t l = 0; l < per_layer.size(); ++l) p.values[l * nd + di] = per_layer[l];
  if (!p.have[di]) {
    p.have[di] = 1;
    ++p.n_have;
  }
  if (p.n_have == nd) {
    s.done_steps.push_back(probe_step);
    s.done_values.insert(s.done_values.end(), p.values.begin(), p.values.end());
    s.in_flight.erase(probe_step);
  }
}

void MetricsWriter::flush_now() {
  Impl& m = *impl_;
  double t0 = dd::now_s();
  // Drain the producer buffers quickly; HDF5 work below runs without blocking appenders.
  std::map<std::string, AttrValue> attrs;
  std::vector<LayerInfo> layers;
  bool layers_dirty;
  std::vector<StepRow> steps;
  std::vector<SyncEventRow> sync_events;
  std::vector<EvalRow> evals;
  std::vector<LayerReadyRow> ready;
  std::vector<EventRow> events;
  struct SensBatch {
    bool create = false;
    std::vector<int32_t> delays;
    int32_t num_layers = 0;
    std::vector<int64_t> steps;
    std::vector<float> values;
  } sens[2];
  {
    std::lock_guard<std::mutex> lk(m.buf_mutex);
    attrs.swap(m.attrs);
    layers_dirty = m.layers_dirty;
    if (layers_dirty) layers = m.layers;
    m.layers_dirty = false;
    steps.swap(m.steps);
    sync_events.swap(m.sync_events);
    evals.swap(m.evals);
    ready.swap(m.layer_ready);
    events.swap(m.events);
    for (int k = 0; k < 2; ++k) {
      SensitivityState& s = m.sens[k];
      sens[k].num_layers = s.num_layers;
      if (s.declared && !s.created) {
        sens[k].create = true;
        sens[k].delays = s.delays;
        s.created = true;
      }
      sens[k].steps.swap(s.done_steps);
      sens[k].values.swap(s.done_values);
    }
  }

  for (const auto& [k, v] : attrs) write_attribute(m.file, k, v);
  if (layers_dirty) {
    std::vector<LayerInfoC> c;
    c.reserve(layers.size());
    for (const auto& l : layers) c.push_back({l.index, l.name.c_str(), l.kind.c_str(), l.params, l.bytes});
    write_rows(m.t_layers, 0, c.data(), c.size());
  }
  append_rows(m.t_steps, steps.data(), steps.size());
  append_rows(m.t_sync, sync_events.data(), sync_events.size());
  append_rows(m.t_eval, evals.data(), evals.size());
  append_rows(m.t_ready, ready.data(), ready.size());
  {
    std::vector<EventRowC> c;
    c.reserve(events.size());
    for (const auto& e : events) c.push_back({e.step, e.kind.c_str(), e.detail.c_str()});
    append_rows(m.t_events, c.data(), c.size());
  }

  for (int k = 0; k < 2; ++k) {
    SensitivityState& s = m.sens[k];  // only the HDF5 handles/rows are touched here (flush side)
    SensBatch& b = sens[k];
    std::string sfx = probe_suffix(static_cast<ProbeKind>(k));
    if (b.create) {
      if (!m.g_sens.valid())
        m.g_sens = Hid(h5check(H5Gcreate2(m.file, "sensitivity", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               "H5Gcreate2 sensitivity"));
      hsize_t nd = b.delays.size(), nl = static_cast<hsize_t>(b.num_layers);
      Hid dspace(h5check(H5Screate_simple(1, &nd, nullptr), "H5Screate_simple"));
      Hid dset(h5check(H5Dcreate2(m.g_sens, ("delays" + sfx).c_str(), H5T_NATIVE_INT32, dspace, H5P_DEFAULT,
                                  H5P_DEFAULT, H5P_DEFAULT),
                       "H5Dcreate2 delays"));
      h5check_status(H5Dwrite(dset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.delays.data()), "delays");

      hsize_t dims[3] = {0, nl, nd}, maxd[3] = {H5S_UNLIMITED, nl, nd};
      hsize_t chunk[3] = {std::max<hsize_t>(1, 4096 / (nl * nd)), nl, nd};
      Hid space(h5check(H5Screate_simple(3, dims, maxd), "H5Screate_simple cosine"));
      Hid dcpl(h5check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"));
      h5check_status(H5Pset_chunk(dcpl, 3, chunk), "H5Pset_chunk cosine");
      float nan = std::numeric_limits<float>::quiet_NaN();
      h5check_status(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &nan), "H5Pset_fill_value");
      s.cosine = Hid(h5check(H5Dcreate2(m.g_sens, ("cosine" + sfx).c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                        dcpl, H5P_DEFAULT),
                             "H5Dcreate2 cosine"));
      write_attribute(s.cosine, "dims", std::string("probe,layer,delay"));
      write_attribute(s.cosine, "probe", std::string(k ? "minibatch" : "fixed_batch"));

      hsize_t pd = 0, pmax = H5S_UNLIMITED, pchunk = 256;
      Hid pspace(h5check(H5Screate_simple(1, &pd, &pmax), "H5Screate_simple"));
      Hid pdcpl(h5check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"));
      h5check_status(H5Pset_chunk(pdcpl, 1, &pchunk), "H5Pset_chunk");
      s.probe_steps = Hid(h5check(H5Dcreate2(m.g_sens, ("probe_steps" + sfx).c_str(), H5T_STD_I64LE, pspace,
                                             H5P_DEFAULT, pdcpl, H5P_DEFAULT),
                                  "H5Dcreate2 probe_steps"));
    }
    if (!b.steps.empty()) {
      hsize_t n = b.steps.size(), start = s.rows, total = s.rows + n;
      hsize_t nl = static_cast<hsize_t>(b.num_layers), nd = b.values.size() / n / nl;
      hsize_t dims[3] = {total, nl, nd};
      h5check_status(H5Dset_extent(s.cosine, dims), "H5Dset_extent cosine");
      Hid fspace(h5check(H5Dget_space(s.cosine), "H5Dget_space"));
      hsize_t st3[3] = {start, 0, 0}, ct3[3] = {n, nl, nd};
      h5check_status(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, st3, nullptr, ct3, nullptr), "select");
      Hid mspace(h5check(H5Screate_simple(3, ct3, nullptr), "H5Screate_simple"));
      h5check_status(H5Dwrite(s.cosine, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, b.values.data()), "cosine");

      h5check_status(H5Dset_extent(s.probe_steps, &total), "H5Dset_extent probe_steps");
      Hid pf(h5check(H5Dget_space(s.probe_steps), "H5Dget_space"));
      h5check_status(H5Sselect_hyperslab(pf, H5S_SELECT_SET, &start, nullptr, &n, nullptr), "select");
      Hid pm(h5check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"));
      h5check_status(H5Dwrite(s.probe_steps, H5T_NATIVE_INT64, pm, pf, H5P_DEFAULT, b.steps.data()), "probe_steps");
      s.rows = total;
    }
  }

  h5check_status(H5Fflush(m.file, H5F_SCOPE_GLOBAL), "H5Fflush");
  ssize_t size = H5Fget_file_image(m.file, nullptr, 0);
  h5check(static_cast<hid_t>(size), "H5Fget_file_image (size)");
  m.image.resize(static_cast<size_t>(size));
  h5check(static_cast<hid_t>(H5Fget_file_image(m.file, m.image.data(), m.image.size())), "H5Fget_file_image");
  publish_atomically(path_, m.image);

  std::lock_guard<std::mutex> lk(m.stats_mutex);
  m.stats.flushes++;
  m.stats.steps = static_cast<int64_t>(m.t_steps.rows);
  m.stats.sync_events = static_cast<int64_t>(m.t_sync.rows);
  m.stats.layer_ready = static_cast<int64_t>(m.t_ready.rows);
  m.stats.eval = static_cast<int64_t>(m.t_eval.rows);
  m.stats.events = static_cast<int64_t>(m.t_events.rows);
  m.stats.file_bytes = static_cast<int64_t>(size);
  m.stats.last_flush_s = dd::now_s() - t0;
}

void MetricsWriter::flush_thread_main() {
  std::unique_lock<std::mutex> lk(stop_mutex_);
  while (!stop_) {
    double interval = std::max(opts_.flush_interval_s, stats().last_flush_s / kMaxFlushDutyCycle);
    stop_cv_.wait_for(lk, std::chrono::duration<double>(interval), [this] { return stop_; });
    if (stop_) break;
    lk.unlock();
    try {
      std::lock_guard<std::mutex> h(hdf5_mutex_);
      flush_now();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "metrics: background flush of %s failed, telemetry stopped: %s\n", path_.c_str(),
                   e.what());
      lk.lock();
      thread_error_ = std::current_exception();
      break;
    }
    lk.lock();
  }
}

void MetricsWriter::flush() {
  {
    std::lock_guard<std::mutex> lk(stop_mutex_);
    if (thread_error_) std::rethrow_exception(thread_error_);
    if (closed_) throw std::logic_error("MetricsWriter::flush after close");
  }
  std::lock_guard<std::mutex> h(hdf5_mutex_);
  flush_now();
}

void MetricsWriter::close() {
  {
    std::lock_guard<std::mutex> lk(stop_mutex_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (thread_error_) {
    impl_->file.reset();
    std::rethrow_exception(thread_error_);
  }
  {
    // Probes whose later delays never came (run ended) are kept, NaN where missing.
    std::lock_guard<std::mutex> lk(impl_->buf_mutex);
    for (auto& s : impl_->sens) {
      for (auto& [step, p] : s.in_flight) {
        s.done_steps.push_back(step);
        s.done_values.insert(s.done_values.end(), p.values.begin(), p.values.end());
      }
      s.in_flight.clear();
    }
  }
  std::lock_guard<std::mutex> h(hdf5_mutex_);
  flush_now();
  Impl& m = *impl_;
  for (auto& s : m.sens) {
    s.cosine.reset();
    s.probe_steps.reset();
  }
  m.g_sens.reset();
  m.t_layers = {};
  m.t_steps = {};
  m.t_sync = {};
  m.t_eval = {};
  m.t_ready = {};
  m.t_events = {};
  m.file.reset();
}

FlushStats MetricsWriter::stats() const {
  std::lock_guard<std::mutex> lk(impl_->stats_mutex);
  return impl_->stats;
}

}  // namespace dd::telemetry
