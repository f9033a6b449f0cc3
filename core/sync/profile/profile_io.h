// Per-layer profile files (bp.json, comm.json: layer name -> seconds, forward order; optional overlap.json:
// {"compute_slowdown": x, "comm_slowdown": y}, see contention.h; optional step.json: {"forward_s": f,
// "update_s": u}, the rest of a step's compute) read and written.
#pragma once
#include <string>
#include <vector>

#include "core/sync/profile/core_share.h"
#include "core/sync/types/contention.h"

namespace dd::sync {

// One profile: per layer (forward order) its backward time and its all-reduce time, in seconds.
struct LayerProfile {
  std::vector<std::string> names;
  std::vector<double> bp;
  std::vector<double> comm;
  // What overlapped communication and compute cost each other (self_profile.h measure_contention); none when
  // the directory has no overlap.json (the artifact's profiles).
  Contention contention;
  // The compute of a step outside the backward: one forward pass and one optimizer update of every layer, in
  // seconds; negative when the directory has no step.json (the artifact's profiles time the backward only).
  double forward_s = -1, update_s = -1;
  // measure_profile only (not stored): each rank's median whole pass, in rank order; the times above are paced
  // to the slowest of them.
  std::vector<double> rank_pass_s;
  // measure_profile only (meta.json keeps it): how the ranks shared their machines' cores; when some machine was
  // oversubscribed, its passes were timed one rank at a time.
  CoreShare shared;
  // The layers whose backward time bp.json gives as NaN (the artifact writes it for modules without parameters,
  // e.g. rotary embeddings): read as 0 s, named by bp_nan_note().
  std::vector<std::string> bp_nan;
};

// Reads DIR/bp.json, DIR/comm.json and, if present, DIR/overlap.json and DIR/step.json. Layer order is bp.json's key order. Throws
// dd::UsageError naming the file for a missing directory/file, invalid JSON, a non-object, a null, non-numeric,
// infinite or negative value, a NaN in comm.json, and naming the layers when the two files do not time the same
// layers. A NaN backward time in bp.json is read as 0 s (LayerProfile::bp_nan; callers print bp_nan_note()).
LayerProfile read_profile(const std::string& dir);
// One line naming the layers whose NaN backward time was read as 0 s; "" when there are none.
std::string bp_nan_note(const LayerProfile& p, const std::string& dir);

// Reads one layer -> seconds JSON object (same value rules as read_profile); names keep the file's key order. A
// NaN value is refused, unless `nan_zero` is given: then it is read as 0 and its layer appended there. `unit`
// names the values in messages ("bytes" for a bytes.json).
std::vector<std::pair<std::string, double>> read_layer_times(const std::string& file,
                                                             std::vector<std::string>* nan_zero = nullptr,
                                                             const std::string& unit = "seconds");

// A layer -> bytes JSON file (a profile's bytes.json, `simulate --bytes`), as the sizes of `names` in their order.
// Throws dd::UsageError naming the file and the layer that has no size or one above 4 TB.
std::vector<double> read_layer_bytes(const std::string& file, const std::vector<std::string>& names);

// Writes DIR/bp.json, DIR/comm.json, DIR/overlap.json and, when the step was timed, DIR/step.json (creating DIR). Refuses to replace existing files unless overwrite.
void write_profile(const std::string& dir, const LayerProfile& profile, bool overwrite = false);

}  // namespace dd::sync
