#include "core/models/model_spec.h"

#include <cerrno>
#include <cstdlib>

#include "base/error.h"

namespace dd::models {

ModelSpec ModelSpec::parse(const std::string& spec) {
  ModelSpec s;
  s.text_ = spec;
  const size_t colon = spec.find(':');
  s.family_ = spec.substr(0, colon);
  if (s.family_.empty()) throw UsageError("model spec '" + spec + "' has no model name");
  if (colon == std::string::npos) return s;
  const std::string rest = spec.substr(colon + 1);
  if (rest.empty()) throw UsageError("model spec '" + spec + "' has ':' but no options");
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string kv = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      throw UsageError("model spec '" + spec + "': option '" + kv + "' is not key=value");
    const std::string key = kv.substr(0, eq);
    if (!s.opts_.emplace(key, kv.substr(eq + 1)).second)
      throw UsageError("model spec '" + spec + "': option '" + key + "' given twice");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return s;
}

int64_t ModelSpec::get(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
  asked_.insert(key);
  const auto it = opts_.find(key);
  if (it == opts_.end()) return dflt;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || x < lo || x > hi)
    throw UsageError("model '" + family_ + "': " + key + "=" + v + " is not an integer in [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "]");
  return int64_t(x);
}

std::string ModelSpec::choose(const std::string& key, const std::vector<std::string>& choices) {
  asked_.insert(key);
  const auto it = opts_.find(key);
  if (it == opts_.end()) return choices.at(0);
  std::string words;
  for (const auto& c : choices) {
    if (c == it->second) return c;
    words += (words.empty() ? "" : ", ") + c;
  }
  throw UsageError("model '" + family_ + "': " + key + "=" + it->second + " is not one of " + words);
}

void ModelSpec::finish() const {
  for (const auto& [key, value] : opts_) {
    if (asked_.count(key)) continue;
    std::string keys;
    for (const auto& k : asked_) keys += (keys.empty() ? "" : ", ") + k;
    throw UsageError("model '" + family_ + "' has no option '" + key + "'" +
                     (keys.empty() ? std::string(" (it takes none)") : " (its options: " + keys + ")"));
  }
}

}  // namespace dd::models
