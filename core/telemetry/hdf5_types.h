// HDF5 compound types for each metrics.h5 table: memory layout of the row structs and packed file layout.
#pragma once
#include <cstdint>

#include "core/telemetry/hdf5_handle.h"
#include "core/telemetry/rows.h"

namespace dd::telemetry {

// Version of the metrics.h5 layout (root attribute telemetry_schema_version); resume refuses other versions.
constexpr int64_t kSchemaVersion = 1;

// C views of the rows that hold strings: HDF5 variable-length strings are written from const char*.
struct LayerInfoC {
  int32_t index;
  const char* name;
  const char* kind;
  int64_t params;
  int64_t bytes;
};
struct EventRowC {
  int64_t step;
  const char* kind;
  const char* detail;
};

Hid vlen_string_type();         // variable-length UTF-8 string
Hid sync_action_enum_type();    // int8 enum, names from sync_action_name()

// Memory types match the structs above / in rows.h byte for byte (HOFFSET).
Hid step_mem_type();
Hid sync_event_mem_type();
Hid eval_mem_type();
Hid layer_ready_mem_type();
Hid event_mem_type();
Hid layer_mem_type();

// File type: a packed copy (no struct padding), which is what h5py users see as the numpy dtype.
Hid packed_copy(hid_t mem_type);

}  // namespace dd::telemetry
