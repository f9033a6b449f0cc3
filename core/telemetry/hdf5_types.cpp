// Builds the compound HDF5 types for each metrics.h5 table from the row structs (column names are a contract).
#include "core/telemetry/hdf5_types.h"

#include <cstddef>

namespace dd::telemetry {
namespace {

// Adds one member; the HDF5 column name is the C++ field name, so the two cannot drift apart silently.
void add(hid_t t, const char* name, size_t off, hid_t type) {
  h5check_status(H5Tinsert(t, name, off, type), std::string("H5Tinsert ") + name);
}

Hid compound(size_t size) { return Hid(h5check(H5Tcreate(H5T_COMPOUND, size), "H5Tcreate compound")); }

}  // namespace

#define DD_ADD(T, S, F, TYPE) add(T, #F, offsetof(S, F), TYPE)

Hid vlen_string_type() {
  Hid t(h5check(H5Tcopy(H5T_C_S1), "H5Tcopy string"));
  h5check_status(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size variable");
  h5check_status(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset utf8");
  return t;
}

Hid sync_action_enum_type() {
  Hid t(h5check(H5Tenum_create(H5T_NATIVE_INT8), "H5Tenum_create"));
  for (SyncAction a : {SyncAction::kNone, SyncAction::kAverageParams, SyncAction::kAllreduceGrads,
                       SyncAction::kControl, SyncAction::kBroadcast}) {
    int8_t v = static_cast<int8_t>(a);
    h5check_status(H5Tenum_insert(t, sync_action_name(a), &v), "H5Tenum_insert");
  }
  return t;
}

Hid step_mem_type() {
  Hid t = compound(sizeof(StepRow));
  DD_ADD(t, StepRow, step, H5T_NATIVE_INT64);
  DD_ADD(t, StepRow, wall_time_s, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, loss, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, lr, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, forward_ms, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, backward_ms, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, update_ms, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, exposed_comm_ms, H5T_NATIVE_DOUBLE);
  DD_ADD(t, StepRow, bytes_sent, H5T_NATIVE_INT64);
  DD_ADD(t, StepRow, samples_per_s, H5T_NATIVE_DOUBLE);
  return t;
}

Hid sync_event_mem_type() {
  Hid t = compound(sizeof(SyncEventRow));
  Hid action = sync_action_enum_type();
  DD_ADD(t, SyncEventRow, step, H5T_NATIVE_INT64);
  DD_ADD(t, SyncEventRow, first_layer, H5T_NATIVE_INT32);
  DD_ADD(t, SyncEventRow, last_layer, H5T_NATIVE_INT32);
  DD_ADD(t, SyncEventRow, action, action);
  DD_ADD(t, SyncEventRow, group, H5T_NATIVE_INT32);
  DD_ADD(t, SyncEventRow, rank, H5T_NATIVE_INT32);
  DD_ADD(t, SyncEventRow, bytes, H5T_NATIVE_INT64);
  DD_ADD(t, SyncEventRow, launch_s, H5T_NATIVE_DOUBLE);
  DD_ADD(t, SyncEventRow, end_s, H5T_NATIVE_DOUBLE);
  return t;
}

Hid eval_mem_type() {
  Hid t = compound(sizeof(EvalRow));
  DD_ADD(t, EvalRow, step, H5T_NATIVE_INT64);
  DD_ADD(t, EvalRow, test_loss, H5T_NATIVE_DOUBLE);
  DD_ADD(t, EvalRow, test_accuracy, H5T_NATIVE_DOUBLE);
  DD_ADD(t, EvalRow, perplexity, H5T_NATIVE_DOUBLE);
  return t;
}

Hid layer_ready_mem_type() {
  Hid t = compound(sizeof(LayerReadyRow));
  DD_ADD(t, LayerReadyRow, step, H5T_NATIVE_INT64);
  DD_ADD(t, LayerReadyRow, rank, H5T_NATIVE_INT32);
  DD_ADD(t, LayerReadyRow, layer, H5T_NATIVE_INT32);
  DD_ADD(t, LayerReadyRow, ready_s, H5T_NATIVE_DOUBLE);
  return t;
}

Hid event_mem_type() {
  Hid t = compound(sizeof(EventRowC));
  Hid str = vlen_string_type();
  DD_ADD(t, EventRowC, step, H5T_NATIVE_INT64);
  DD_ADD(t, EventRowC, kind, str);
  DD_ADD(t, EventRowC, detail, str);
  return t;
}

Hid layer_mem_type() {
  Hid t = compound(sizeof(LayerInfoC));
  Hid str = vlen_string_type();
  DD_ADD(t, LayerInfoC, index, H5T_NATIVE_INT32);
  DD_ADD(t, LayerInfoC, name, str);
  DD_ADD(t, LayerInfoC, kind, str);
  DD_ADD(t, LayerInfoC, params, H5T_NATIVE_INT64);
  DD_ADD(t, LayerInfoC, bytes, H5T_NATIVE_INT64);
  return t;
}

#undef DD_ADD

Hid packed_copy(hid_t mem_type) {
  Hid t(h5check(H5Tcopy(mem_type), "H5Tcopy compound"));
  h5check_status(H5Tpack(t), "H5Tpack");
  return t;
}

}  // namespace dd::telemetry
