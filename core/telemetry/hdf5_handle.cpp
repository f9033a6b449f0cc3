// RAII owner for HDF5 ids; every HDF5 failure becomes an exception that says which call failed.
#include "core/telemetry/hdf5_handle.h"

#include <stdexcept>

namespace dd::telemetry {

Hid& Hid::operator=(Hid&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Hid::reset() {
  // H5Idec_ref closes any kind of id, so one wrapper serves files, datasets, types and property lists.
  if (id_ >= 0) H5Idec_ref(id_);
  id_ = H5I_INVALID_HID;
}

hid_t h5check(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error("HDF5: " + what + " failed");
  return id;
}

herr_t h5check_status(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5: " + what + " failed");
  return status;
}

}  // namespace dd::telemetry
