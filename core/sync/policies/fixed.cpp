// fixed: a period K_l per layer, by rule (input 8, middle 4, head 1) or by name pattern (first match wins); layers
// of one period are staggered in contiguous groups of ~equal bytes so they do not all fire on the same step.
#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "core/sync/policies/fixed.h"
#include "core/sync/policy/registry.h"
#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

bool glob_match(const std::string& p, const std::string& s) {
  size_t i = 0, j = 0, star = std::string::npos, mark = 0;
  while (j < s.size()) {
    if (i < p.size() && (p[i] == '?' || p[i] == s[j])) {
      ++i, ++j;
    } else if (i < p.size() && p[i] == '*') {
      star = i++;
      mark = j;
    } else if (star != std::string::npos) {  // let the last '*' swallow one more character
      i = star + 1;
      j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.size() && p[i] == '*') ++i;
  return i == p.size();
}

std::vector<int> layer_roles(const std::vector<LayerMeta>& layers) {
  const int L = int(layers.size());
  std::vector<int> role(L, 1);
  bool any_embedding = false;
  for (int l = 0; l < L; ++l)
    if (layers[l].kind == "embedding") role[l] = 0, any_embedding = true;
  if (!any_embedding && L > 0) {
    // The input block: the first layer and the normalization that belongs to it (conv1 + bn1).
    role[0] = 0;
    for (int l = 1; l < L && (layers[l].kind == "batchnorm" || layers[l].kind == "layernorm"); ++l) role[l] = 0;
  }
  if (L > 0) role[L - 1] = 2;
  return role;
}

namespace {
const std::vector<std::string> kRuleKeys = {"in", "mid", "out"};

bool is_rule_key(const std::string& k) {
  for (auto& r : kRuleKeys)
    if (r == k) return true;
  return false;
}

// Keys in the order the user wrote them (PolicySpec keeps a map): patterns are tried first to last.
std::vector<std::string> keys_in_order(const PolicySpec& s) {
  std::vector<std::string> keys;
  auto colon = s.text.find(':');
  if (colon == std::string::npos) return keys;
  std::stringstream rest(s.text.substr(colon + 1));
  std::string item;
  while (std::getline(rest, item, ',')) keys.push_back(item.substr(0, item.find('=')));
  return keys;
}
}  // namespace

FixedPolicy::FixedPolicy(const PolicySpec& s) {
  caps_.reporting = this;
  const int64_t kMax = 1 << 20;
  for (auto& k : keys_in_order(s)) {
    if (is_rule_key(k)) continue;
    if (k == "default") {
      by_pattern_ = true;
      continue;
    }
    patterns_.push_back({k, int(s.get_int(k, 4, 1, kMax))});
    by_pattern_ = true;
  }
  if (!s.kv.empty() && keys_in_order(s).size() != s.kv.size())
    throw UsageError("--policy fixed: could not read the keys of '" + s.text + "'");
  bool rule_keys = false;
  for (auto& k : kRuleKeys) rule_keys |= s.kv.count(k) > 0;
  if (by_pattern_ && rule_keys)
    throw UsageError("--policy fixed: give either the rule (in=,mid=,out=) or name patterns with default=, not both");
  in_ = int(s.get_int("in", 8, 1, kMax));
  mid_ = int(s.get_int("mid", 4, 1, kMax));
  out_ = int(s.get_int("out", 1, 1, kMax));
  dflt_ = int(s.get_int("default", 4, 1, kMax));
}

std::string FixedPolicy::describe() const {
  std::ostringstream o;
  o << "fixed:";
  if (!by_pattern_) return o.str() + "in=" + std::to_string(in_) + ",mid=" + std::to_string(mid_) + ",out=" +
                           std::to_string(out_);
  for (auto& [p, k] : patterns_) o << p << "=" << k << ",";
  o << "default=" << dflt_;
  return o.str();
}

void FixedPolicy::setup(const std::vector<LayerMeta>& layers, int world) {
  Policy::setup(layers, world);
  const int L = int(layers.size());
  period_.assign(L, dflt_);
  if (by_pattern_) {
    std::vector<bool> used(patterns_.size(), false);
    for (int l = 0; l < L; ++l)
      for (size_t i = 0; i < patterns_.size(); ++i)
        if (glob_match(patterns_[i].first, layers[l].name)) {
          period_[l] = patterns_[i].second;
          used[i] = true;
          break;
        }
    // A pattern that names no layer is almost always a typo; say which names exist.
    for (size_t i = 0; i < patterns_.size(); ++i) {
      bool any = false;
      for (auto& m : layers) any |= glob_match(patterns_[i].first, m.name);
      if (!any) {
        std::string names;
        for (auto& m : layers) names += (names.empty() ? "" : " ") + m.name;
        throw UsageError("--policy fixed: pattern '" + patterns_[i].first + "' matches no layer of this model " +
                         "(layers: " + names + ")");
      }
    }
  } else {
    const int by_role[3] = {in_, mid_, out_};
    auto role = layer_roles(layers);
    for (int l = 0; l < L; ++l) period_[l] = by_role[role[l]];
  }
  // Stagger: the layers of period K, in forward order, split into K contiguous groups of ~equal bytes, group g
  // firing at phase g; with fewer layers than K the groups are spread evenly over the K phases.
  offset_.assign(L, 0);
  std::vector<int> periods(period_);
  std::sort(periods.begin(), periods.end());
  periods.erase(std::unique(periods.begin(), periods.end()), periods.end());
  for (int K : periods) {
    if (K == 1) continue;
    std::vector<int> members;
    std::vector<double> bytes;
    for (int l = 0; l < L; ++l)
      if (period_[l] == K) members.push_back(l), bytes.push_back(double(layers[l].bytes));
    auto group = contiguous_groups(bytes, K);
    const int groups = std::min<int>(K, int(members.size()));
    for (size_t i = 0; i < members.size(); ++i) offset_[members[i]] = int(int64_t(group[i]) * K / groups);
  }
}

Action FixedPolicy::decide(int layer, int64_t step) const {
  const int K = period_[layer];
  if (K == 1) return Action::AllreduceGrads;
  return (step - offset_[layer]) % K == 0 ? Action::AverageParams : Action::None;
}

std::string FixedPolicy::plan() const {
  std::ostringstream o;
  o << "fixed: period@offset per layer (" << (by_pattern_ ? "by name pattern" : "by rule in/mid/out") << "):";
  for (size_t l = 0; l < period_.size(); ++l)
    o << " " << layers_[l].name << "=" << period_[l] << (period_[l] > 1 ? "@" + std::to_string(offset_[l]) : "");
  return o.str();
}

namespace {
const bool registered = register_policy("fixed", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<FixedPolicy>(s);
});
}  // namespace

}  // namespace dd::sync
