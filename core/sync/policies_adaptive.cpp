// Spec -> object for the adaptive family (fixed, threshold, autothreshold, staleness, hybrid) and for the
// "A+staleness:t=T" composition; the keys and defaults are documented in POLICIES.md.
#include "core/common/error.h"
#include "core/sync/policies_adaptive.h"
#include "core/sync/policy_factory.h"

namespace dd::sync {

namespace {
int64_t staleness_t(const PolicySpec& s, int64_t dflt) { return s.get_int("t", dflt, 1, 1 << 20); }
}  // namespace

std::unique_ptr<Policy> make_adaptive_policy(const PolicySpec& s) {
  if (s.name == "fixed") return std::make_unique<FixedPolicy>(s);
  if (s.name == "threshold" || s.name == "autothreshold") return std::make_unique<ThresholdPolicy>(s);
  if (s.name == "staleness") {
    s.allow_only({"t"});
    return std::make_unique<StalenessCap>(nullptr, staleness_t(s, 8));
  }
  if (s.name == "hybrid") {
    // Whichever fires first: the threshold's trigger, or the cap t.
    const int64_t t = staleness_t(s, 8);
    PolicySpec inner = s;
    inner.kv.erase("t");
    // The recommended default uses the auto-tuned line (measured best; POLICIES.md); thr= selects a fixed line.
    if (!inner.kv.count("auto") && !inner.kv.count("thr")) inner.kv["auto"] = "1";
    auto th = std::make_unique<ThresholdPolicy>(inner);
    std::string keys = th->describe().substr(std::string("threshold:").size());
    return std::make_unique<StalenessCap>(std::move(th), t, "hybrid:t=" + std::to_string(t) + "," + keys);
  }
  return nullptr;
}

std::unique_ptr<Policy> make_composite_policy(const PolicySpec& s) {
  if (s.text.find('+') == std::string::npos) return nullptr;
  std::vector<std::string> parts;
  size_t pos = 0;
  for (;;) {
    size_t plus = s.text.find('+', pos);
    parts.push_back(s.text.substr(pos, plus == std::string::npos ? std::string::npos : plus - pos));
    if (plus == std::string::npos) break;
    pos = plus + 1;
  }
  std::vector<PolicySpec> caps, others;
  for (auto& p : parts) {
    auto ps = PolicySpec::parse(p);
    (ps.name == "staleness" ? caps : others).push_back(ps);
  }
  if (caps.size() != 1 || others.size() != 1)
    throw UsageError("--policy '" + s.text + "': '+' composes one policy with one staleness cap, e.g. " +
                     "dreamddp:h=8+staleness:t=4");
  caps[0].allow_only({"t"});
  return std::make_unique<StalenessCap>(make_policy(others[0]), staleness_t(caps[0], 8));
}

}  // namespace dd::sync
