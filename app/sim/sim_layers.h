// The layer table a simulation runs on: per layer (forward order) the policy's LayerMeta, the arena ranges the
// bucket planner fuses, and the profile's backward and all-reduce times. Built from a profile directory plus a
// source of layer sizes (the project's model, a bytes.json, or sizes implied by the comm times).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/layer_meta.h"
#include "core/sync/types/bucket_plan.h"
#include "core/sync/types/contention.h"

namespace dd::sim {

struct SimLayers {
  std::vector<sync::LayerMeta> meta;
  std::vector<sync::LayerRange> ranges;
  std::vector<double> bp_s, comm_s;  // from bp.json / comm.json
  sync::Contention contention;       // from overlap.json (none without one)
  double forward_s = -1, update_s = -1;  // per step, from step.json (negative: the profile has none)
  int64_t num_params = 0, num_buffers = 0;
  std::string size_source;           // how the sizes were obtained (for the run's attributes)
  int size() const { return int(meta.size()); }
};

struct LayerSizeSource {
  std::string model;   // --model M: the project's model (names must match the profile's, as for dreamddp:profile=)
  std::string bytes;   // --bytes FILE: JSON layer -> bytes
  double comm_Bps = 0; // --comm-bw BW: bytes_l = comm_l * BW (so a one-link 2-rank ring of bandwidth BW with
                       // CM02's model, no latency, takes exactly comm_l)
};

// Reads DIR/bp.json, DIR/comm.json (core/sync/profile/profile_io) and the sizes; without any source, DIR/bytes.json.
// Throws dd::UsageError naming the file or the layer that is missing or bad.
SimLayers load_layers(const std::string& profile_dir, const LayerSizeSource& src);

// What a `dreamddp profile` directory's meta.json says: found is false without one, model "" when it names none
// (or is not JSON). shared_cores: "C,threads=T" when its passes were timed one rank at a time on a machine of
// C cores (the --shared-cores that shares them again), else "".
struct ProfileMeta {
  bool found = false;
  std::string model;
  std::string shared_cores;
};
ProfileMeta read_profile_meta(const std::string& profile_dir);

}  // namespace dd::sim
