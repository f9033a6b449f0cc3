// PolicySpec parsing and typed key access with range checks (bad specs are usage errors, exit 2).
#include <cctype>
#include <cerrno>
#include <cmath>
#include <map>
#include <cstdlib>

#include "base/error.h"
#include "core/sync/policy/merge_spec.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

namespace {
// Keys whose value may carry its own keys, and those keys.
const std::map<std::string, std::vector<std::string>> kNestedKeys = {{"outer", {"lr", "momentum"}},
                                                                     {"compress", {"p", "values"}}};

bool nested_key_of(const std::string& parent, const std::string& key) {
  auto it = kNestedKeys.find(parent);
  if (it == kNestedKeys.end()) return false;
  for (auto& k : it->second)
    if (k == key) return true;
  return false;
}

// A plain decimal number, the only form a key's number may take: -?[0-9]+(.[0-9]*)?([eE][-+]?[0-9]+)? or with
// the digits after the point only (".5"). strtod/strtoll alone also take spaces, '+', hexadecimal, inf and nan.
bool plain_decimal(const std::string& v, bool integer) {
  size_t i = 0, n = v.size();
  auto digits = [&] {
    size_t s = i;
    while (i < n && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    return i - s;
  };
  if (i < n && v[i] == '-') ++i;
  size_t d = digits();
  if (integer) return d > 0 && i == n;
  if (i < n && v[i] == '.') ++i, d += digits();
  if (d == 0) return false;
  if (i < n && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < n && (v[i] == '-' || v[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == n;
}

// "A+B": the texts of the policies a '+' followed by a letter separates.
std::vector<std::string> split_policies(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '+' && (i + 1 == text.size() || !std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  out.push_back(text.substr(start));
  return out;
}

PolicySpec parse_one(const std::string& text, const std::string& whole);
}  // namespace

bool parse_number(const std::string& v, double* out) {
  if (!plain_decimal(v, false)) return false;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (!end || *end || errno == ERANGE || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

bool parse_integer(const std::string& v, int64_t* out) {
  if (!plain_decimal(v, true)) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (!end || *end || errno == ERANGE) return false;
  *out = x;
  return true;
}

const PolicySpec& PolicySpec::base() const {
  for (auto& p : parts)
    if (p.name != "staleness") return p;
  return parts.empty() ? *this : parts.back();
}

const PolicySpec* PolicySpec::cap() const {
  for (auto& p : parts)
    if (p.name == "staleness") return &p;
  return nullptr;
}

PolicySpec PolicySpec::parse(const std::string& text) {
  const auto texts = split_policies(text);
  if (texts.size() == 1) return parse_one(text, text);
  PolicySpec s;
  s.text = text;
  s.name = "staleness";  // the composer: make_policy hands a composite to its factory
  int caps = 0;
  for (auto& t : texts) {
    if (t.empty()) throw UsageError("--policy '" + text + "': empty policy around '+'");
    s.parts.push_back(parse_one(t, text));
    caps += s.parts.back().name == "staleness";
  }
  if (s.parts.size() != 2 || caps != 1)
    throw UsageError("--policy '" + text + "': '+' composes one policy with one staleness cap, e.g. " +
                     "dreamddp:h=8+staleness:t=4");
  return s;
}

namespace {
// One policy of a spec (`whole`, for messages): NAME[:key=value,...].
PolicySpec parse_one(const std::string& text, const std::string& whole) {
  PolicySpec s;
  s.text = text;
  auto colon = text.find(':');
  s.name = text.substr(0, colon);
  if (s.name.empty()) throw UsageError("--policy '" + whole + "': missing policy name");
  if (colon == std::string::npos) return s;
  std::string rest = text.substr(colon + 1);
  size_t pos = 0;
  std::string nested;  // the key whose own keys the next items may be
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw UsageError("--policy '" + whole + "': empty key=value item");
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--policy '" + whole + "': expected key=value, got '" + item + "'");
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
        throw UsageError("--policy '" + whole + "': expected " + k + "=NAME:key=value with a key of " + k + ", got '" + item + "'");
      const std::string k2 = k + "." + sub.substr(0, eq2);
      if (s.kv.count(k2)) throw UsageError("--policy '" + whole + "': key '" + k2 + "' given twice");
      s.kv[k2] = sub.substr(eq2 + 1);
    }
    if (kNestedKeys.count(k)) nested = k;
    if (s.kv.count(k)) throw UsageError("--policy '" + whole + "': key '" + k + "' given twice");
    s.kv[k] = v;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return s;
}
}  // namespace

int64_t PolicySpec::get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  int64_t v = 0;
  if (!parse_integer(it->second, &v) || v < lo || v > hi)
    throw UsageError("--policy " + name + ": " + key + "=" + it->second + " must be an integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

double PolicySpec::get_double(const std::string& key, double dflt, double lo, double hi) const {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  double v = 0;
  if (!parse_number(it->second, &v) || v < lo || v > hi)
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

}  // namespace dd::sync
