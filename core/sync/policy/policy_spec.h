// PolicySpec: a --policy value parsed into its name and keys, with typed, range-checked access.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dd::sync {

// "name:key=value,key=value" parsed; unknown keys are refused by the policy that reads them. A value may carry its
// own keys, "outer=nesterov:lr=0.7,momentum=0.9" or "compress=topk:p=1,values=int8": they are stored as "outer.lr",
// "outer.momentum", "compress.p", ... (the items after it whose key is one of that value's keys belong to it; see
// kNestedKeys in policy_spec.cpp).
struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> kv;
  std::string text;  // as given

  static PolicySpec parse(const std::string& text);                  // throws dd::UsageError
  int64_t get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const;
  double get_double(const std::string& key, double dflt, double lo, double hi) const;
  std::string get_str(const std::string& key, const std::string& dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  void allow_only(const std::vector<std::string>& keys) const;        // throws on any other key
  void allow_only_with_merge_keys(std::vector<std::string> keys) const;  // keys + merge_keys()
};

// A --switch STEP:SPEC value: from `step` on, the policy of `spec` (parse_switches in registry.h).
struct PolicySwitch {
  int64_t step;
  PolicySpec spec;
};

}  // namespace dd::sync
