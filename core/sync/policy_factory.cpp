// make_policy: spec name -> policy object; unknown names are usage errors listing the known ones.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "core/common/error.h"
#include "core/sync/policies_adaptive.h"
#include "core/sync/policy_factory.h"

namespace dd::sync {

namespace {
std::map<std::string, PolicyFactory>& registry() {
  static std::map<std::string, PolicyFactory> r;
  return r;
}
}  // namespace

bool register_policy(const std::string& name, PolicyFactory factory) {
  registry()[name] = factory;
  return true;
}

std::unique_ptr<Policy> make_policy(const PolicySpec& s) {
  if (auto p = make_composite_policy(s)) return p;  // "A+staleness:t=T" before the name is looked at
  if (auto p = make_baseline_policy(s)) return p;
  if (auto p = make_dreamddp_policy(s)) return p;
  if (auto p = make_adaptive_policy(s)) return p;
  if (auto p = make_hier_policy(s)) return p;
  auto it = registry().find(s.name);
  if (it != registry().end()) return it->second(s);
  std::string known = "ddp, localsgd, plsgd, dreamddp, hier, fixed, threshold, autothreshold, staleness, hybrid";
  for (auto& [n, f] : registry()) known += ", " + n;
  throw UsageError("--policy: unknown policy '" + s.name + "' (known: " + known + ")");
}

void check_policy_fits_device(const Policy& p, const std::string& spec, bool on_device) {
  if (on_device && p.wants_signals())
    throw UsageError("--policy " + spec + ": reads local gradient statistics on the host every step; with "
                     "--device cuda use ddp, localsgd, plsgd, dreamddp, fixed or staleness");
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
    std::string spec = s.substr(colon + 1);
    try {
      make_policy(PolicySpec::parse(spec));  // validate now, before any work
    } catch (const UsageError& e) {
      throw UsageError("--switch '" + s + "': " + e.what());
    }
    out.push_back({step, spec});
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.step < b.step; });
  return out;
}

}  // namespace dd::sync
