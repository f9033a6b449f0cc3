// PolicySpec parsing and typed key access with range checks (bad specs are usage errors, exit 2).
#include <cmath>
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

PolicySpec PolicySpec::parse(const std::string& text) {
  PolicySpec s;
  s.text = text;
  auto colon = text.find(':');
  s.name = text.substr(0, colon);
  if (s.name.empty()) throw UsageError("--policy '" + text + "': missing policy name");
  if (colon == std::string::npos) return s;
  std::string rest = text.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw UsageError("--policy '" + text + "': empty key=value item");
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--policy '" + text + "': expected key=value, got '" + item + "'");
    std::string k = item.substr(0, eq);
    if (s.kv.count(k)) throw UsageError("--policy '" + text + "': key '" + k + "' given twice");
    s.kv[k] = item.substr(eq + 1);
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

int parse_merge_delay(const PolicySpec& s, const std::string& policy, int h) {
  const int64_t d = s.get_int("delay", 0, 0, 1024);
  if (d >= h)
    throw UsageError("--policy " + policy + ": delay=" + std::to_string(d) + " must be below h=" + std::to_string(h) +
                     " (a layer's next average starts h steps after the last, which must have been merged)");
  return int(d);
}

}  // namespace dd::sync
