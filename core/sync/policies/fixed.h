// fixed: a period per layer, by rule or by name pattern (POLICIES.md). Declared for tests that read the periods.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sync/policy/policy.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// Shell-style match of a whole layer name: '*' is any run of characters (dots included), '?' one character.
bool glob_match(const std::string& pattern, const std::string& name);

// fixed: layer l averages its parameters once per K_l steps, at steps where (step - offset_l) % K_l == 0
// (K_l = 1: gradient all-reduce every step). K_l by rule (in/mid/out) or by name patterns, first match wins.
class FixedPolicy : public Policy, public Reporting {
 public:
  explicit FixedPolicy(const PolicySpec& s);
  std::string describe() const override;
  void setup(const std::vector<LayerMeta>& layers, int world) override;
  Action decide(int layer, int64_t step) const override;
  std::string plan() const override;
  int period(int layer) const { return period_.at(size_t(layer)); }
  int offset(int layer) const { return offset_.at(size_t(layer)); }

 private:
  int in_ = 8, mid_ = 4, out_ = 1, dflt_ = 4;
  std::vector<std::pair<std::string, int>> patterns_;  // in the order given
  bool by_pattern_ = false;
  std::vector<int> period_, offset_;
};

// The rule of `fixed`: 0 input (embedding layers; without any, the first layer and the norm layers right after
// it), 2 output head (the last layer), 1 everything in between.
std::vector<int> layer_roles(const std::vector<LayerMeta>& layers);

}  // namespace dd::sync
