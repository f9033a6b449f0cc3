// make_policy: spec name -> policy object; unknown names are usage errors listing the known ones.
#include "core/common/error.h"
#include "core/sync/policy_factory.h"

namespace dd::sync {

std::unique_ptr<Policy> make_policy(const PolicySpec& s) {
  if (auto p = make_baseline_policy(s)) return p;
  if (auto p = make_dreamddp_policy(s)) return p;
  throw UsageError("--policy: unknown policy '" + s.name + "' (known: ddp, localsgd, plsgd, dreamddp)");
}

}  // namespace dd::sync
