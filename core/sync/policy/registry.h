// The policy registry: spec names to policy objects, filled alike by the built-in policies (core/sync/policies/)
// and users' policies, and what is checked through it (a --switch value, a policy on a device).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// ddp, localsgd:k=K, plsgd:h=H[,delay=T], dreamddp:h=H[,profile=DIR][,fillin=1][,profile_steps=N][,delay=T], and
// registered ones.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec);

// --switch STEP:SPEC values, each SPEC parsed and validated (it builds a policy), sorted by step. Throws
// dd::UsageError.
std::vector<PolicySwitch> parse_switches(const std::vector<std::string>& args);

// A policy is one C++ file: implement Policy and register a factory under a name, e.g.
//   static bool reg = dd::sync::register_policy("mine", [](const PolicySpec& s) { return std::make_unique<Mine>(s); });
// The built-in policies (core/sync/policies/) register themselves exactly so. Registering a taken name throws.
using PolicyFactory = std::unique_ptr<Policy> (*)(const PolicySpec&);
bool register_policy(const std::string& name, PolicyFactory factory);
// The registered names, sorted (tests that must cover every policy iterate over them).
std::vector<std::string> registered_policies();

}  // namespace dd::sync
