// hybrid:t=T[,threshold keys]: threshold under a staleness cap, whichever fires first. The recommended default uses
// the auto-tuned line (measured best; POLICIES.md); thr= selects a fixed line.
#include "core/sync/policies/staleness.h"
#include "core/sync/policies/threshold.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {
namespace {

std::unique_ptr<Policy> make_hybrid(const PolicySpec& s) {
  const int64_t t = s.get_int("t", 8, 1, 1 << 20);
  PolicySpec inner = s;
  inner.kv.erase("t");
  if (!inner.kv.count("auto") && !inner.kv.count("thr")) inner.kv["auto"] = "1";
  auto th = std::make_unique<ThresholdPolicy>(inner);
  std::string keys = th->describe().substr(std::string("threshold:").size());
  return std::make_unique<StalenessCap>(std::move(th), t, "hybrid:t=" + std::to_string(t) + "," + keys);
}

const bool registered = register_policy("hybrid", make_hybrid);

}  // namespace
}  // namespace dd::sync
