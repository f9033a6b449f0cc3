// ddp: every layer lock-step, its gradient all-reduced from the hook each step (PyTorch DDP).
#include "core/sync/policy/registry.h"

namespace dd::sync {
namespace {

class DdpPolicy : public Policy {
 public:
  explicit DdpPolicy(const PolicySpec& s) { s.allow_only({}); }
  std::string describe() const override { return "ddp"; }
  Action decide(int, int64_t) const override { return Action::AllreduceGrads; }
};

const bool registered = register_policy("ddp", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<DdpPolicy>(s);
});

}  // namespace
}  // namespace dd::sync
