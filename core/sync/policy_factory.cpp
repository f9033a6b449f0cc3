// make_policy: spec name -> policy object; unknown names are usage errors listing the known ones.
#include <map>

#include "core/common/error.h"
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
  if (auto p = make_baseline_policy(s)) return p;
  if (auto p = make_dreamddp_policy(s)) return p;
  auto it = registry().find(s.name);
  if (it != registry().end()) return it->second(s);
  std::string known = "ddp, localsgd, plsgd, dreamddp";
  for (auto& [n, f] : registry()) known += ", " + n;
  throw UsageError("--policy: unknown policy '" + s.name + "' (known: " + known + ")");
}

}  // namespace dd::sync
