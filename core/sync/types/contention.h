// What communication in flight and compute cost each other where they share cores (several ranks on one host,
// communication threads and network stacks beside compute threads): measured by measure_contention
// (self_profile.h), stored in a profile's overlap.json, charged by the schedule model (schedule_model.h).
#pragma once

namespace dd::sync {

struct Contention {
  double compute = 0;  // compute runs 1 + compute times longer while communication is in flight
  double comm = 0;     // communication runs 1 + comm times longer while compute runs
  bool none() const { return compute == 0 && comm == 0; }
};

}  // namespace dd::sync
