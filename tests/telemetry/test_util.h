// Shared helpers for telemetry tests: scratch directories and reading compound tables with the HDF5 C API.
#pragma once
#include <hdf5.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/telemetry/hdf5_handle.h"
#include "core/telemetry/hdf5_types.h"

namespace dd::telemetry::testing {

// A fresh empty directory under the system temp dir, removed at scope exit.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dd_telemetry_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline hsize_t rows_of(hid_t ds) {
  Hid space(H5Dget_space(ds));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  return n;
}

// Reads a whole 1-D table into Row structs using `mem_type` (HDF5 matches members by name).
template <class Row>
std::vector<Row> read_table(hid_t file, const char* name, hid_t mem_type) {
  Hid ds(h5check(H5Dopen2(file, name, H5P_DEFAULT), std::string("open ") + name));
  std::vector<Row> rows(rows_of(ds));
  if (!rows.empty()) h5check_status(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), "read");
  return rows;
}

// Column names of a compound dataset, in file order.
inline std::vector<std::string> column_names(hid_t file, const char* name) {
  Hid ds(H5Dopen2(file, name, H5P_DEFAULT));
  Hid t(H5Dget_type(ds));
  std::vector<std::string> out;
  for (int i = 0; i < H5Tget_nmembers(t); ++i) {
    char* n = H5Tget_member_name(t, static_cast<unsigned>(i));
    out.emplace_back(n);
    H5free_memory(n);
  }
  return out;
}

// A scalar string attribute (variable-length UTF-8) and a scalar numeric one.
inline std::string read_string_attr(hid_t obj, const char* key) {
  Hid a(h5check(H5Aopen(obj, key, H5P_DEFAULT), key));
  Hid t = vlen_string_type();
  char* s = nullptr;
  h5check_status(H5Aread(a, t, &s), key);
  std::string out(s);
  H5free_memory(s);
  return out;
}

template <class T>
T read_scalar_attr(hid_t obj, const char* key, hid_t type) {
  Hid a(h5check(H5Aopen(obj, key, H5P_DEFAULT), key));
  T v{};
  h5check_status(H5Aread(a, type, &v), key);
  return v;
}

}  // namespace dd::telemetry::testing
