// Device arrays in the byte formats of checkpoints and engine state (core/common/bytes.h): through a host copy, the
// same bytes as put_floats / get_floats of host memory, so a file does not say on which device it was written.
#pragma once
#include <cstddef>
#include <vector>

#include "core/common/bytes.h"
#include "core/ops/device.h"

namespace dd::ops {

// The first n floats of `a` (all of them by default), as ByteWriter::put_floats writes them.
inline void put_device_floats(ByteWriter& w, const DeviceFloats& a, size_t n) {
  std::vector<float> host(n);
  if (n) a.device().copy_to_host(host.data(), a.data(), sizeof(float) * n);
  w.put_floats(host.data(), n);
}
inline void put_device_floats(ByteWriter& w, const DeviceFloats& a) { put_device_floats(w, a, a.size()); }

// Reads exactly n floats (ByteReader::get_floats: the stored count must match) into the first n of `a`.
inline void get_device_floats(ByteReader& r, DeviceFloats& a, size_t n) {
  std::vector<float> host(n);
  r.get_floats(host.data(), n);
  from_host(a, host.data(), n);
}
inline void get_device_floats(ByteReader& r, DeviceFloats& a) { get_device_floats(r, a, a.size()); }

}  // namespace dd::ops
