// Action: what one layer does at one step, as a policy decides it (docs/policies.md) and a bucket carries it.
#pragma once
#include <cstdint>

namespace dd::sync {

// AverageGroup averages the layer's parameters inside this rank's group only (two-level topology, `hier`).
enum class Action : int8_t { None = 0, AverageParams = 1, AllreduceGrads = 2, AverageGroup = 3 };
const char* action_name(Action a);

}  // namespace dd::sync
