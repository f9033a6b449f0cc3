// PolicySpec parsing and typed key access with range checks (bad specs are usage errors, exit 2).
#include <cmath>
#include <cstdio>
#include <map>
#include <cstdlib>

#include "core/common/error.h"
#include "core/sync/policy.h"

namespace dd::sync {

const char* action_name(Action a) {
  switch (a) {
    case Action::None: return "none";
    case Action::AverageParams: return "average-params";
    case Action::AllreduceGrads: return "allreduce-grads";
    case Action::AverageGroup: return "average-group";
  }
  return "?";
}

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::None: return "none";
    case Codec::Bf16: return "bf16";
    case Codec::Int8: return "int8";
  }
  return "?";
}

namespace {
// Keys whose value may carry its own keys, and those keys.
const std::map<std::string, std::vector<std::string>> kNestedKeys = {{"outer", {"lr", "momentum"}}};

bool nested_key_of(const std::string& parent, const std::string& key) {
  auto it = kNestedKeys.find(parent);
  if (it == kNestedKeys.end()) return false;
  for (auto& k : it->second)
    if (k == key) return true;
  return false;
}
}  // namespace

PolicySpec PolicySpec::parse(const std::string& text) {
  PolicySpec s;
  s.text = text;
  auto colon = text.find(':');
  s.name = text.substr(0, colon);
  if (s.name.empty()) throw UsageError("--policy '" + text + "': missing policy name");
  if (colon == std::string::npos) return s;
  std::string rest = text.substr(colon + 1);
  size_t pos = 0;
  std::string nested;  // the key whose own keys the next items may be
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw UsageError("--policy '" + text + "': empty key=value item");
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--policy '" + text + "': expected key=value, got '" + item + "'");
    std::string k = item.substr(0, eq);
    std::string v = item.substr(eq + 1);
    // "outer=nesterov:lr=0.7": a value with keys of its own opens them; the items after it that are its keys follow.
    if (!nested.empty() && nested_key_of(nested, k)) k = nested + "." + k;
    else nested.clear();
    const auto colon2 = v.find(':');
    if (colon2 != std::string::npos && kNestedKeys.count(k)) {
      std::string sub = v.substr(colon2 + 1);
      v = v.substr(0, colon2);
      auto eq2 = sub.find('=');
      if (eq2 == std::string::npos || eq2 == 0 || eq2 + 1 == sub.size() || !nested_key_of(k, sub.substr(0, eq2)))
        throw UsageError("--policy '" + text + "': expected " + k + "=NAME:key=value with a key of " + k + ", got '" + item + "'");
      const std::string k2 = k + "." + sub.substr(0, eq2);
      if (s.kv.count(k2)) throw UsageError("--policy '" + text + "': key '" + k2 + "' given twice");
      s.kv[k2] = sub.substr(eq2 + 1);
    }
    if (kNestedKeys.count(k)) nested = k;
    if (s.kv.count(k)) throw UsageError("--policy '" + text + "': key '" + k + "' given twice");
    s.kv[k] = v;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}

int64_t PolicySpec::get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno || !end || *end || v < lo || v > hi)
    throw UsageError("--policy " + name + ": " + key + "=" + it->second + " must be an integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

double PolicySpec::get_double(const std::string& key, double dflt, double lo, double hi) const {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (!end || *end || !std::isfinite(v) || v < lo || v > hi)
    throw UsageError("--policy " + name + ": " + key + "=" + it->second + " must be a number in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::string PolicySpec::get_str(const std::string& key, const std::string& dflt) const {
  auto it = kv.find(key);
  return it == kv.end() ? dflt : it->second;
}

bool PolicySpec::get_bool(const std::string& key, bool dflt) const {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  if (it->second == "1" || it->second == "true" || it->second == "on") return true;
  if (it->second == "0" || it->second == "false" || it->second == "off") return false;
  throw UsageError("--policy " + name + ": " + key + "=" + it->second + " must be 0/1");
}

void PolicySpec::allow_only_with_merge_keys(std::vector<std::string> keys) const {
  keys.insert(keys.end(), merge_keys().begin(), merge_keys().end());
  allow_only(keys);
}

void PolicySpec::allow_only(const std::vector<std::string>& keys) const {
  for (auto& [k, v] : kv) {
    bool ok = false;
    for (auto& a : keys) ok |= (a == k);
    if (!ok) {
      std::string list;
      for (auto& a : keys) list += (list.empty() ? "" : ", ") + a;
      throw UsageError("--policy " + name + ": unknown key '" + k + "'" +
                       (list.empty() ? " (it takes none)" : " (known: " + list + ")"));
    }
  }
}

const std::vector<std::string>& merge_keys() {
  static const std::vector<std::string> keys = {"delay", "outer", "outer.lr", "outer.momentum", "compress"};
  return keys;
}

MergeSpec parse_merge(const PolicySpec& s, const std::string& policy, int64_t h) {
  MergeSpec m;
  const int64_t d = s.get_int("delay", 0, 0, 1024);
  if (d >= h)
    throw UsageError("--policy " + policy + ": delay=" + std::to_string(d) + " must be below " +
                     (policy == "localsgd" ? "k=" : "h=") + std::to_string(h) +
                     " (a layer's next average starts that many steps after the last, which must have been merged)");
  m.delay = int(d);
  const std::string outer = s.get_str("outer", "avg");
  if (outer == "nesterov") {
    m.nesterov = true;
    m.outer_lr = s.get_double("outer.lr", 0.7, 1e-6, 10);
    m.outer_momentum = s.get_double("outer.momentum", 0.9, 0, 0.999);
  } else if (outer == "avg") {
    if (s.kv.count("outer.lr") || s.kv.count("outer.momentum"))
      throw UsageError("--policy " + policy + ": outer=avg takes no lr or momentum (did you mean outer=nesterov:lr=...?)");
  } else {
    throw UsageError("--policy " + policy + ": outer=" + outer + " is not one of avg, nesterov");
  }
  const std::string c = s.get_str("compress", "none");
  if (c == "none") m.compress = Codec::None;
  else if (c == "bf16") m.compress = Codec::Bf16;
  else if (c == "int8") m.compress = Codec::Int8;
  else if (c == "auto") m.compress = Codec::Bf16, m.compress_auto = true;
  else throw UsageError("--policy " + policy + ": compress=" + c + " is not one of none, bf16, int8, auto");
  return m;
}

std::string MergeSpec::describe() const {
  std::string o;
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (delay) o += ",delay=" + std::to_string(delay);
  if (nesterov) o += ",outer=nesterov:lr=" + num(outer_lr) + ",momentum=" + num(outer_momentum);
  if (compress != Codec::None) o += std::string(",compress=") + (compress_auto ? "auto" : codec_name(compress));
  return o;
}

}  // namespace dd::sync
