// MetricsFile: creating the metrics.h5 tables and datasets and appending rows to them, in a core-driver file.
#include "core/telemetry/metrics_schema.h"

#include <hdf5.h>

#include <algorithm>
#include <limits>
#include <variant>

#include "core/telemetry/hdf5_types.h"

namespace dd::telemetry {
namespace {

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

}  // namespace

MetricsFile::MetricsFile(const std::string& path) {
  Hid fapl(h5check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate fapl"));
  // The file lives in memory and is published by snapshot; nothing is written in place (crash safety).
  h5check_status(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  // 1.8-compatible format: no superblock "open for write" flags, so any h5py/h5dump reads the snapshots.
  h5check_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  file_ = Hid(h5check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate " + path));

  layers_ = create_table(file_, "layers", layer_mem_type());
  steps_ = create_table(file_, "steps", step_mem_type());
  sync_ = create_table(file_, "sync_events", sync_event_mem_type());
  eval_ = create_table(file_, "eval", eval_mem_type());
  ready_ = create_table(file_, "layer_ready", layer_ready_mem_type());
  events_ = create_table(file_, "events", event_mem_type());
  write_attribute(sync_.ds, "launch_end_reference", std::string("seconds since the step's backward start"));
  write_attribute(ready_.ds, "ready_reference", std::string("seconds since the step's backward start"));
}

MetricsFile::Table MetricsFile::create_table(hid_t loc, const char* name, Hid mem_type) {
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
void MetricsFile::write_rows(Table& t, hsize_t from, const void* data, size_t n) {
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

void MetricsFile::append_rows(Table& t, const void* data, size_t n) {
  if (n) write_rows(t, t.rows, data, n);
}

void MetricsFile::write(const RowBatch& b) {
  for (const auto& [k, v] : b.attrs) write_attribute(file_, k, v);
  if (!b.decisions.empty() && !g_dec_.valid())
    g_dec_ = Hid(h5check(H5Gcreate2(file_, "decisions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2 decisions"));
  for (const auto& [k, v] : b.decisions) write_attribute(g_dec_, k, v);
  if (b.layers_dirty) {
    std::vector<LayerInfoC> c;
    c.reserve(b.layers.size());
    for (const auto& l : b.layers) c.push_back({l.index, l.name.c_str(), l.kind.c_str(), l.params, l.bytes});
    write_rows(layers_, 0, c.data(), c.size());
  }
  append_rows(steps_, b.steps.data(), b.steps.size());
  append_rows(sync_, b.sync_events.data(), b.sync_events.size());
  append_rows(eval_, b.evals.data(), b.evals.size());
  append_rows(ready_, b.layer_ready.data(), b.layer_ready.size());
  {
    std::vector<EventRowC> c;
    c.reserve(b.events.size());
    for (const auto& e : b.events) c.push_back({e.step, e.kind.c_str(), e.detail.c_str()});
    append_rows(events_, c.data(), c.size());
  }
  for (int k = 0; k < 2; ++k) {
    if (b.probes[k].create) create_probes(k, b.probes[k]);
    if (!b.probes[k].steps.empty()) append_probes(k, b.probes[k]);
  }
}

// /sensitivity/delays[sfx] (fixed), cosine[sfx] [probe, layer, delay] and probe_steps[sfx] [probe] (extendable).
void MetricsFile::create_probes(int k, const ProbeBatch& b) {
  Probes& s = probes_[k];
  std::string sfx = probe_suffix(static_cast<ProbeKind>(k));
  if (!g_sens_.valid())
    g_sens_ = Hid(h5check(H5Gcreate2(file_, "sensitivity", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                          "H5Gcreate2 sensitivity"));
  hsize_t nd = b.delays.size(), nl = static_cast<hsize_t>(b.num_layers);
  Hid dspace(h5check(H5Screate_simple(1, &nd, nullptr), "H5Screate_simple"));
  Hid dset(h5check(H5Dcreate2(g_sens_, ("delays" + sfx).c_str(), H5T_NATIVE_INT32, dspace, H5P_DEFAULT,
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
  s.cosine = Hid(h5check(H5Dcreate2(g_sens_, ("cosine" + sfx).c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                    dcpl, H5P_DEFAULT),
                         "H5Dcreate2 cosine"));
  write_attribute(s.cosine, "dims", std::string("probe,layer,delay"));
  write_attribute(s.cosine, "probe", std::string(k ? "minibatch" : "fixed_batch"));

  hsize_t pd = 0, pmax = H5S_UNLIMITED, pchunk = 256;
  Hid pspace(h5check(H5Screate_simple(1, &pd, &pmax), "H5Screate_simple"));
  Hid pdcpl(h5check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"));
  h5check_status(H5Pset_chunk(pdcpl, 1, &pchunk), "H5Pset_chunk");
  s.probe_steps = Hid(h5check(H5Dcreate2(g_sens_, ("probe_steps" + sfx).c_str(), H5T_STD_I64LE, pspace,
                                         H5P_DEFAULT, pdcpl, H5P_DEFAULT),
                              "H5Dcreate2 probe_steps"));
}

void MetricsFile::append_probes(int k, const ProbeBatch& b) {
  Probes& s = probes_[k];
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

const std::vector<char>& MetricsFile::image() {
  h5check_status(H5Fflush(file_, H5F_SCOPE_GLOBAL), "H5Fflush");
  ssize_t size = H5Fget_file_image(file_, nullptr, 0);
  h5check(static_cast<hid_t>(size), "H5Fget_file_image (size)");
  image_.resize(static_cast<size_t>(size));
  h5check(static_cast<hid_t>(H5Fget_file_image(file_, image_.data(), image_.size())), "H5Fget_file_image");
  return image_;
}

TableRows MetricsFile::rows() const {
  return {static_cast<int64_t>(steps_.rows), static_cast<int64_t>(sync_.rows), static_cast<int64_t>(ready_.rows),
          static_cast<int64_t>(eval_.rows), static_cast<int64_t>(events_.rows)};
}

void MetricsFile::close() {
  for (auto& s : probes_) {
    s.cosine.reset();
    s.probe_steps.reset();
  }
  g_sens_.reset();
  layers_ = {};
  steps_ = {};
  sync_ = {};
  eval_ = {};
  ready_ = {};
  events_ = {};
  file_.reset();
}

}  // namespace dd::telemetry
