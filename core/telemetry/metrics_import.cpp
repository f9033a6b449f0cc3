// Imports an existing metrics.h5 (HDF5 C API) for a resumed run: attributes, /layers, and rows up to step S.
#include "core/telemetry/metrics_import.h"

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/telemetry/hdf5_handle.h"
#include "core/telemetry/hdf5_types.h"

namespace dd::telemetry {
namespace {

// HDF5 prints its whole error stack on every failed call; a corrupt file must yield one clear line instead.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

bool link_exists(hid_t loc, const std::string& name) {
  return H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0;
}

hsize_t extent_1d(hid_t ds, const std::string& name) {
  Hid space(h5check(H5Dget_space(ds), "H5Dget_space " + name));
  if (H5Sget_simple_extent_ndims(space) != 1) throw std::runtime_error("/" + name + " is not 1-D");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  return n;
}

// Reads a whole 1-D table; HDF5 maps compound members by name, so the row structs' memory types serve as is.
template <class Row>
std::vector<Row> read_rows(hid_t file, const std::string& name, hid_t mem_type) {
  if (!link_exists(file, name)) throw std::runtime_error("table /" + name + " is missing");
  Hid ds(h5check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "open /" + name));
  std::vector<Row> rows(extent_1d(ds, name));
  if (!rows.empty())
    h5check_status(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), "read /" + name);
  return rows;
}

// Same for tables with variable-length strings: copies them out, then returns HDF5's string memory.
template <class RowC, class Row, class Convert>
std::vector<Row> read_string_rows(hid_t file, const std::string& name, hid_t mem_type, Convert convert) {
  std::vector<RowC> raw = read_rows<RowC>(file, name, mem_type);
  std::vector<Row> out;
  out.reserve(raw.size());
  for (const RowC& r : raw) out.push_back(convert(r));
  if (!raw.empty()) {
    hsize_t n = raw.size();
    Hid space(h5check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"));
    H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, raw.data());
  }
  return out;
}

std::string str_or_empty(const char* s) { return s ? std::string(s) : std::string(); }

// Reads one string attribute (scalar or 1-D, variable or fixed length).
AttrValue read_string_attr(hid_t attr, hid_t file_type, hid_t space, const std::string& key) {
  int ndims = H5Sget_simple_extent_ndims(space);
  hsize_t n = 1;
  if (ndims == 1) H5Sget_simple_extent_dims(space, &n, nullptr);
  else if (ndims != 0) throw std::runtime_error("attribute " + key + " has " + std::to_string(ndims) + " dims");
  std::vector<std::string> values;
  if (H5Tis_variable_str(file_type) > 0) {
    Hid mem = vlen_string_type();
    std::vector<char*> ptrs(n, nullptr);
    h5check_status(H5Aread(attr, mem, ptrs.data()), "read attribute " + key);
    for (char* p : ptrs) {
      values.push_back(str_or_empty(p));
      if (p) H5free_memory(p);
    }
  } else {
    size_t len = H5Tget_size(file_type);
    Hid mem(h5check(H5Tcopy(H5T_C_S1), "H5Tcopy"));
    h5check_status(H5Tset_size(mem, len), "H5Tset_size");
    std::vector<char> buf(len * n);
    h5check_status(H5Aread(attr, mem, buf.data()), "read attribute " + key);
    for (hsize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + i * len;
      values.emplace_back(p, strnlen(p, len));
    }
  }
  if (ndims == 0) return values.at(0);
  return values;
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// Every root attribute the writer's AttrValue can hold; anything else is reported and skipped, not fatal:
// this writer never produces it, and refusing the resume over a hand-added attribute would be worse.
std::map<std::string, AttrValue> read_root_attributes(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  h5check_status(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names), "list attributes");
  std::map<std::string, AttrValue> out;
  for (const std::string& key : names) {
    Hid attr(h5check(H5Aopen(file, key.c_str(), H5P_DEFAULT), "open attribute " + key));
    Hid type(h5check(H5Aget_type(attr), "H5Aget_type " + key));
    Hid space(h5check(H5Aget_space(attr), "H5Aget_space " + key));
    bool scalar = H5Sget_simple_extent_ndims(space) == 0;
    switch (H5Tget_class(type)) {
      case H5T_STRING:
        out[key] = read_string_attr(attr, type, space, key);
        continue;
      case H5T_INTEGER:
        if (scalar) {
          int64_t v = 0;
          h5check_status(H5Aread(attr, H5T_NATIVE_INT64, &v), "read attribute " + key);
          out[key] = v;
          continue;
        }
        break;
      case H5T_FLOAT:
        if (scalar) {
          double v = 0;
          h5check_status(H5Aread(attr, H5T_NATIVE_DOUBLE, &v), "read attribute " + key);
          out[key] = v;
          continue;
        }
        break;
      default:
        break;
    }
    std::fprintf(stderr, "metrics: resuming %s: root attribute '%s' has a type this writer cannot keep; dropped\n",
                 path.c_str(), key.c_str());
  }
  return out;
}

// The /decisions group's string attributes (absent group: none).
std::map<std::string, std::string> read_decision_attrs(hid_t file, const std::string& path) {
  std::map<std::string, std::string> out;
  if (H5Lexists(file, "decisions", H5P_DEFAULT) <= 0) return out;
  Hid g(h5check(H5Gopen2(file, "decisions", H5P_DEFAULT), "open /decisions"));
  for (auto& [k, v] : read_root_attributes(g, path))
    if (auto* s = std::get_if<std::string>(&v)) out[k] = *s;
  return out;
}

// Keeps rows with step <= s, counting what was dropped.
template <class Row>
void keep_until(std::vector<Row>& rows, int64_t s, int64_t* dropped) {
  auto end = std::remove_if(rows.begin(), rows.end(), [s](const Row& r) { return r.step > s; });
  *dropped += static_cast<int64_t>(rows.end() - end);
  rows.erase(end, rows.end());
}

ImportedProbes read_probes(hid_t file, const std::string& sfx, int64_t s) {
  ImportedProbes p;
  const std::string cname = "sensitivity/cosine" + sfx;
  if (!link_exists(file, "sensitivity") || !link_exists(file, cname)) return p;
  p.present = true;

  Hid dds(h5check(H5Dopen2(file, ("sensitivity/delays" + sfx).c_str(), H5P_DEFAULT), "open delays" + sfx));
  p.delays.resize(extent_1d(dds, "sensitivity/delays" + sfx));
  if (p.delays.empty()) throw std::runtime_error("/sensitivity/delays" + sfx + " is empty");
  h5check_status(H5Dread(dds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.delays.data()), "read delays");

  Hid pds(h5check(H5Dopen2(file, ("sensitivity/probe_steps" + sfx).c_str(), H5P_DEFAULT), "open probe_steps"));
  std::vector<int64_t> steps(extent_1d(pds, "sensitivity/probe_steps" + sfx));
  if (!steps.empty())
    h5check_status(H5Dread(pds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps.data()), "read probe_steps");

  Hid cds(h5check(H5Dopen2(file, cname.c_str(), H5P_DEFAULT), "open " + cname));
  Hid cspace(h5check(H5Dget_space(cds), "H5Dget_space " + cname));
  hsize_t dims[3] = {0, 0, 0};
  if (H5Sget_simple_extent_ndims(cspace) != 3) throw std::runtime_error("/" + cname + " is not 3-D");
  H5Sget_simple_extent_dims(cspace, dims, nullptr);
  if (dims[0] != steps.size() || dims[2] != p.delays.size() || dims[1] == 0)
    throw std::runtime_error("/" + cname + " shape does not match its probe_steps/delays");
  p.num_layers = static_cast<int32_t>(dims[1]);
  std::vector<float> all(dims[0] * dims[1] * dims[2]);
  if (!all.empty())
    h5check_status(H5Dread(cds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), "read " + cname);

  // A probe is complete once its longest delay has been measured; later ones need gradients the checkpoint
  // does not hold, so the resumed run cannot finish them and their partial rows are dropped.
  const int64_t max_delay = *std::max_element(p.delays.begin(), p.delays.end());
  const size_t row = static_cast<size_t>(dims[1] * dims[2]);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] + max_delay <= s) {
      p.steps.push_back(steps[i]);
      p.values.insert(p.values.end(), all.begin() + static_cast<std::ptrdiff_t>(i * row),
                      all.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
    } else {
      ++p.dropped;
    }
  }
  return p;
}

ImportedRun read_file(hid_t file, const std::string& path, int64_t s) {
  ImportedRun run;
  run.attrs = read_root_attributes(file, path);
  auto ver = run.attrs.find("telemetry_schema_version");
  if (ver == run.attrs.end() || !std::holds_alternative<int64_t>(ver->second))
    throw std::runtime_error("no telemetry_schema_version attribute");
  if (std::get<int64_t>(ver->second) != kSchemaVersion)
    throw std::runtime_error("schema version " + std::to_string(std::get<int64_t>(ver->second)) +
                             ", this build writes version " + std::to_string(kSchemaVersion));

  Hid lmem = layer_mem_type();
  run.layers = read_string_rows<LayerInfoC, LayerInfo>(file, "layers", lmem, [](const LayerInfoC& c) {
    return LayerInfo{c.index, str_or_empty(c.name), str_or_empty(c.kind), c.params, c.bytes};
  });
  Hid smem = step_mem_type(), emem = sync_event_mem_type(), vmem = eval_mem_type(), rmem = layer_ready_mem_type();
  run.steps = read_rows<StepRow>(file, "steps", smem);
  run.sync_events = read_rows<SyncEventRow>(file, "sync_events", emem);
  run.evals = read_rows<EvalRow>(file, "eval", vmem);
  run.layer_ready = read_rows<LayerReadyRow>(file, "layer_ready", rmem);
  Hid tmem = event_mem_type();
  run.events = read_string_rows<EventRowC, EventRow>(file, "events", tmem, [](const EventRowC& c) {
    return EventRow{c.step, str_or_empty(c.kind), str_or_empty(c.detail)};
  });

  keep_until(run.steps, s, &run.dropped_rows);
  keep_until(run.sync_events, s, &run.dropped_rows);
  keep_until(run.evals, s, &run.dropped_rows);
  keep_until(run.layer_ready, s, &run.dropped_rows);
  keep_until(run.events, s, &run.dropped_rows);
  for (const StepRow& r : run.steps) run.last_step = std::max(run.last_step, r.step);

  // A decision taken after S is taken again by the resumed run (or restored with the engine's checkpoint).
  for (auto& [k, v] : read_decision_attrs(file, path)) {
    const auto j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("decided_at", int64_t(0)) > s) continue;
    run.decisions[k] = v;
  }
  run.probes[static_cast<int>(ProbeKind::kFixedBatch)] = read_probes(file, "", s);
  run.probes[static_cast<int>(ProbeKind::kMinibatch)] = read_probes(file, "_minibatch", s);
  return run;
}

}  // namespace

ImportedRun import_metrics(const std::string& path, int64_t after_step) {
  QuietHdf5Errors quiet;
  try {
    if (H5Fis_hdf5(path.c_str()) <= 0) throw std::runtime_error("not an HDF5 file");
    Hid file(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen"));
    return read_file(file, path, after_step);
  } catch (const dd::UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw dd::UsageError("cannot resume metrics file " + path + " (unreadable, corrupt or not a dreamddp "
                         "metrics.h5): " + e.what() + ". Move it away (its earlier metrics are then lost) or "
                         "resume with another --out");
  }
}

}  // namespace dd::telemetry

namespace dd::telemetry {

std::map<std::string, std::string> read_decisions(const std::string& path) {
  QuietHdf5Errors quiet;
  try {
    if (H5Fis_hdf5(path.c_str()) <= 0) throw std::runtime_error("not an HDF5 file");
    Hid file(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen"));
    return read_decision_attrs(file, path);
  } catch (const std::exception& e) {
    throw dd::UsageError("cannot read the decisions of " + path + ": " + e.what());
  }
}

}  // namespace dd::telemetry
