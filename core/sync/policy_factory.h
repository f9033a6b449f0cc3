// Per-family policy constructors; make_policy (policy_factory.cpp) tries each family in turn.
#pragma once
#include <memory>

#include "core/sync/policy.h"

namespace dd::sync {
std::unique_ptr<Policy> make_baseline_policy(const PolicySpec& s);   // ddp, localsgd, plsgd
std::unique_ptr<Policy> make_dreamddp_policy(const PolicySpec& s);   // dreamddp
std::unique_ptr<Policy> make_hier_policy(const PolicySpec& s);       // hier
}  // namespace dd::sync
