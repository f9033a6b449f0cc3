// make_policy: spec name -> policy object, through one registry that the built-in policies (core/sync/policies/,
// one file each) and users' policies fill alike; unknown names are usage errors listing the registered ones.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "base/error.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {

namespace {
std::map<std::string, PolicyFactory>& registry() {
  static std::map<std::string, PolicyFactory> r;
  return r;
}
// "A+staleness:t=T" (either order) is the staleness cap's composition: its factory reads the whole spec.
constexpr const char* kComposer = "staleness";
}  // namespace

bool register_policy(const std::string& name, PolicyFactory factory) {
  if (!factory || name.empty() || name.find_first_of(":,=+") != std::string::npos)
    throw std::logic_error("register_policy: '" + name + "' is not a policy name (or has no factory)");
  if (!registry().emplace(name, factory).second)
    throw std::logic_error("register_policy: a policy named '" + name + "' is already registered");
  return true;
}

std::vector<std::string> registered_policies() {
  std::vector<std::string> names;
  for (auto& [n, f] : registry()) names.push_back(n);
  return names;
}

std::unique_ptr<Policy> make_policy(const PolicySpec& s) {
  const std::string name = s.composite() ? kComposer : s.name;
  auto it = registry().find(name);
  if (it != registry().end()) return it->second(s);
  std::string known;
  for (auto& [n, f] : registry()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("--policy: unknown policy '" + s.name + "' (known: " + known + ")");
}

std::vector<PolicySwitch> parse_switches(const std::vector<std::string>& v) {
  std::vector<PolicySwitch> out;
  for (auto& s : v) {
    auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0)
      throw UsageError("--switch '" + s + "': expected STEP:SPEC, e.g. 500:ddp");
    char* end = nullptr;
    errno = 0;
    const std::string step_text = s.substr(0, colon);  // outlives `end`, which points into it
    long long step = std::strtoll(step_text.c_str(), &end, 10);
    if (!end || *end || step < 0 || errno == ERANGE)
      throw UsageError("--switch '" + s + "': STEP must be a non-negative integer");
    PolicySpec spec;
    try {
      spec = PolicySpec::parse(s.substr(colon + 1));
      make_policy(spec);  // validate now, before any work
    } catch (const UsageError& e) {
      throw UsageError("--switch '" + s + "': " + e.what());
    }
    out.push_back({step, std::move(spec)});
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.step < b.step; });
  return out;
}

}  // namespace dd::sync
