// RAII owner for HDF5 ids and a checker that turns HDF5 failures into exceptions naming the operation.
#pragma once
#include <hdf5.h>

#include <string>

namespace dd::telemetry {

// Owns one HDF5 identifier of any kind (file, dataset, type, space, plist, attribute) and releases it once.
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Hid& operator=(Hid&& o) noexcept;
  ~Hid() { reset(); }
  void reset();
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Throws std::runtime_error("HDF5: <what> failed") when an HDF5 call returned a negative id/status.
hid_t h5check(hid_t id, const std::string& what);
herr_t h5check_status(herr_t status, const std::string& what);

}  // namespace dd::telemetry
