// localsgd:k=K: the whole model averaged every K steps, blocking, after the update (plain Local SGD); with
// delay=T launched without waiting and merged T steps later.
#include "core/sync/policy/registry.h"

namespace dd::sync {
namespace {

class LocalSgdPolicy : public Policy, public Reporting {
 public:
  explicit LocalSgdPolicy(const PolicySpec& s)
      : k_(s.get_int("k", 8, 1, 1 << 20)), merge_(parse_merge(s, "localsgd", k_)) {
    s.allow_only_with_merge_keys({"k"});
    // With delay=T the whole-model average after step t is launched without waiting and merged at step t + T.
    set_merge(merge_);
    set_period(k_);
    caps_.reporting = this;
  }
  std::string describe() const override { return "localsgd:k=" + std::to_string(k_) + merge_.describe(); }
  Action decide(int, int64_t) const override { return Action::None; }
  bool full_average_after(int64_t step) const override { return (step + 1) % k_ == 0; }
  // With a delay, what overlaps the average: launched after the update, merged at the start of step + T, so T - 1
  // whole steps run beside it (delay=1 overlaps nothing; dreamddp's delay=1 overlaps the rest of its backward).
  std::string plan() const override {
    if (merge_.delay == 0) return "";
    const int64_t over = merge_.delay - 1;
    return describe() + ": the whole-model average launched after every " + std::to_string(k_) +
           " updates is merged " + std::to_string(merge_.delay) + " step" + (merge_.delay == 1 ? "" : "s") +
           " later: " +
           (over == 0 ? "nothing overlaps it (the merge is at the start of the next step; delay=2 overlaps one step)"
                      : std::to_string(over) + (over == 1 ? " step of compute overlaps it" : " steps of compute overlap it"));
  }

 private:
  int64_t k_;
  MergeSpec merge_;
};

const bool registered = register_policy("localsgd", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<LocalSgdPolicy>(s);
});

}  // namespace
}  // namespace dd::sync
