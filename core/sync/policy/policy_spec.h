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
//
// The grammar, parsed once here and nowhere else (docs/policies.md "Spec grammar"):
//   spec      := policy | policy "+" policy        (a composite: one policy and one staleness cap, either order)
//   policy    := NAME [":" item ("," item)*]
//   item      := KEY "=" VALUE | KEY "=" NAME ":" KEY "=" VALUE   (a value with keys of its own: outer=, compress=)
// A '+' not followed by a digit starts the next policy (so "1e+3" stays a number). Numbers are plain decimals
// ("-?[0-9]+(.[0-9]*)?([eE][-+]?[0-9]+)?"): no spaces, no hexadecimal, no inf or nan.
struct PolicySpec {
  std::string name;  // a composite's is "staleness", the policy that composes
  std::map<std::string, std::string> kv;
  std::string text;  // as given
  // A composite's two policies, each parsed as above (without parts of its own); empty for one policy.
  std::vector<PolicySpec> parts;

  bool composite() const { return !parts.empty(); }
  // The policy a composite wraps (the part that is not the staleness cap) or, for one policy, the spec itself.
  const PolicySpec& base() const;
  // The staleness cap of a composite (nullptr for one policy).
  const PolicySpec* cap() const;

  static PolicySpec parse(const std::string& text);                  // throws dd::UsageError
  int64_t get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const;
  double get_double(const std::string& key, double dflt, double lo, double hi) const;
  std::string get_str(const std::string& key, const std::string& dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  void allow_only(const std::vector<std::string>& keys) const;        // throws on any other key
  void allow_only_with_merge_keys(std::vector<std::string> keys) const;  // keys + merge_keys()
};

// A key's number in the one form the grammar takes (plain decimal, above): false for anything else.
bool parse_number(const std::string& v, double* out);
bool parse_integer(const std::string& v, int64_t* out);

// A --switch STEP:SPEC value: from `step` on, the policy of `spec` (parse_switches in registry.h).
struct PolicySwitch {
  int64_t step;
  PolicySpec spec;
};

}  // namespace dd::sync
