// Reading and writing the per-layer profile files bp.json / comm.json (format of data/dreamddp-profiles).
#include "core/sync/profile/profile_io.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace dd::sync {
namespace fs = std::filesystem;

namespace {

// Python's json module writes NaN as a bare token, which strict JSON parsers reject; it becomes the string kNanMark
// before parsing, so that the reader sees which layer has no measurement rather than refusing the syntax.
const std::string kNanMark("\0NaN", 4);
const std::string kNanMarkJson = "\"\\u0000NaN\"";

std::string nan_to_mark(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
    } else if (text.compare(i, 4, "-NaN") == 0) {
      out += kNanMarkJson;
      i += 3;
    } else if (text.compare(i, 3, "NaN") == 0) {
      out += kNanMarkJson;
      i += 2;
    } else {
      out += ch;
    }
  }
  return out;
}

// A layer name as a JSON string literal: quoted, control characters escaped, so an error message stays one line.
std::string quoted(const std::string& name) {
  return nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A small JSON object file of named numbers: returns a getter that refuses (naming the file, its expected
// `shape` and the key) a missing, non-numeric, infinite or negative value.
std::function<double(const char*)> object_of_numbers(const std::string& file, const std::string& shape) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("profile file " + file + " is not valid JSON: " + e.what());
  }
  return [j, file, shape](const char* key) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      throw UsageError("profile file " + file + " must hold " + shape + ", each a finite number >= 0 (" + key +
                       " is not)");
    return it->get<double>();
  };
}

}  // namespace

std::vector<std::pair<std::string, double>> read_layer_times(const std::string& file,
                                                             std::vector<std::string>* nan_zero,
                                                             const std::string& unit) {
  std::ifstream in(file);
  if (!in) throw UsageError("cannot read profile file " + file + " (missing or unreadable)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(nan_to_mark(ss.str()));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("profile file " + file + " is not valid JSON: " + e.what());
  }
  if (!j.is_object())
    throw UsageError("profile file " + file + " must hold a JSON object {layer: " + unit + ", ...}");
  std::vector<std::pair<std::string, double>> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    double v = 0.0;
    if (it.value().is_string() && it.value().get<std::string>() == kNanMark && nan_zero) {
      nan_zero->push_back(it.key());  // a module without parameters has no backward of its own: 0 s
    } else if (it.value().is_null() || (it.value().is_string() && it.value().get<std::string>() == kNanMark)) {
      // A layer without a time would cost nothing in every model built on the profile: a wrong figure.
      throw UsageError("profile file " + file + ": layer " + quoted(it.key()) + " has no " +
                       (unit == "seconds" ? "time" : "value") + " (" + (it.value().is_null() ? "null" : "NaN") +
                       "; need a finite number of " + unit + " >= 0)");
    } else if (it.value().is_number()) {
      v = it.value().get<double>();
      if (!std::isfinite(v) || v < 0.0)
        throw UsageError("profile file " + file + ": layer " + quoted(it.key()) + " has invalid " +
                         (unit == "seconds" ? "time " : "value ") + it.value().dump() + " (need a finite number of " +
                         unit + " >= 0)");
    } else {
      // The type, not the value: a value may be nested deeply enough to overflow the stack of a recursive dump.
      throw UsageError("profile file " + file + ": layer " + quoted(it.key()) + " has a non-numeric value (" +
                       it.value().type_name() + "; need " + unit + " as a number)");
    }
    out.emplace_back(it.key(), v);
  }
  return out;
}

std::string bp_nan_note(const LayerProfile& p, const std::string& dir) {
  if (p.bp_nan.empty()) return "";
  std::string names;
  for (size_t i = 0; i < p.bp_nan.size() && i < 8; ++i) names += (i ? ", " : "") + quoted(p.bp_nan[i]);
  if (p.bp_nan.size() > 8) names += ", ... (" + std::to_string(p.bp_nan.size()) + " in all)";
  return "profile " + dir + ": bp.json gives NaN as the backward time of " + names +
         " (modules without parameters): read as 0 s";
}

std::vector<double> read_layer_bytes(const std::string& file, const std::vector<std::string>& names) {
  std::map<std::string, double> by;
  for (auto& [n, v] : read_layer_times(file, nullptr, "bytes")) by[n] = v;
  std::vector<double> out;
  for (auto& n : names) {
    auto it = by.find(n);
    if (it == by.end()) throw UsageError(file + ": no size for layer '" + n + "'");
    if (it->second > 4e12) throw UsageError(file + ": layer '" + n + "' is larger than 4 TB");
    out.push_back(it->second);
  }
  return out;
}

LayerProfile read_profile(const std::string& dir) {
  if (!fs::is_directory(dir)) throw UsageError("profile directory " + dir + " does not exist");
  std::vector<std::string> bp_nan;
  auto bp = read_layer_times((fs::path(dir) / "bp.json").string(), &bp_nan);
  auto comm = read_layer_times((fs::path(dir) / "comm.json").string());

  if (bp.empty() && comm.empty())
    throw UsageError("profile directory " + dir + " holds no layers (bp.json and comm.json are empty objects)");
  // Both files must time the same layers: a layer that one file lacks would cost 0 there.
  const std::string bp_file = (fs::path(dir) / "bp.json").string();
  const std::string comm_file = (fs::path(dir) / "comm.json").string();
  auto only_in = [](const std::vector<std::pair<std::string, double>>& a,
                    const std::vector<std::pair<std::string, double>>& b) {
    std::unordered_map<std::string, int> in_b;
    for (const auto& kv : b) in_b[kv.first] = 1;
    std::vector<std::string> missing;
    for (const auto& kv : a)
      if (!in_b.count(kv.first)) missing.push_back(kv.first);
    return missing;
  };
  auto refuse_missing = [&](const std::vector<std::string>& missing, const std::string& has,
                            const std::string& lacks, size_t lacks_count) {
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 3; ++i) names += (i ? ", " : "") + quoted(missing[i]);
    if (missing.size() > 3) names += ", ...";
    throw UsageError("profile directory " + dir + ": " + std::to_string(missing.size()) + " layer(s) of " + has +
                     " have no time in " + lacks + " (" + names + "; it names " + std::to_string(lacks_count) +
                     " layers): both files must time the same layers");
  };
  const auto bp_only = only_in(bp, comm), comm_only = only_in(comm, bp);
  if (!bp_only.empty()) refuse_missing(bp_only, bp_file, comm_file, comm.size());
  if (!comm_only.empty()) refuse_missing(comm_only, comm_file, bp_file, bp.size());

  LayerProfile p;
  p.bp_nan = std::move(bp_nan);
  std::unordered_map<std::string, size_t> index;
  for (auto& [name, t] : bp) {
    if (index.count(name)) continue;  // ordered_json keeps the last duplicate only; guard anyway
    index[name] = p.names.size();
    p.names.push_back(name);
    p.bp.push_back(t);
  }
  p.comm.assign(p.names.size(), 0.0);
  for (auto& [name, t] : comm) p.comm[index.at(name)] = t;
  const auto overlap = fs::path(dir) / "overlap.json";
  if (fs::exists(overlap)) {
    const auto get = object_of_numbers(overlap.string(), "{\"compute_slowdown\": x, \"comm_slowdown\": y}");
    p.contention.compute = get("compute_slowdown");
    p.contention.comm = get("comm_slowdown");
  }
  const auto step = fs::path(dir) / "step.json";
  if (fs::exists(step)) {
    const auto get = object_of_numbers(step.string(), "{\"forward_s\": f, \"update_s\": u}");
    p.forward_s = get("forward_s");
    p.update_s = get("update_s");
  }
  return p;
}

void write_profile(const std::string& dir, const LayerProfile& profile, bool overwrite) {
  DD_CHECK(profile.bp.size() == profile.names.size() && profile.comm.size() == profile.names.size(),
           "profile vectors must have one entry per layer");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw UsageError("cannot create profile directory " + dir + ": " + ec.message());
  auto write_one = [&](const std::string& file, const std::vector<double>& v) {
    if (!overwrite && fs::exists(file)) throw UsageError("refusing to overwrite existing profile file " + file);
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (size_t i = 0; i < v.size(); ++i) j[profile.names[i]] = v[i];
    std::ofstream out(file);
    if (!out) throw UsageError("cannot write profile file " + file);
    out << j.dump(4) << "\n";
    if (!out) throw UsageError("error while writing profile file " + file);
  };
  write_one((fs::path(dir) / "bp.json").string(), profile.bp);
  write_one((fs::path(dir) / "comm.json").string(), profile.comm);
  const std::string overlap = (fs::path(dir) / "overlap.json").string();
  if (!overwrite && fs::exists(overlap)) throw UsageError("refusing to overwrite existing profile file " + overlap);
  std::ofstream out(overlap);
  out << nlohmann::ordered_json{{"compute_slowdown", profile.contention.compute},
                                {"comm_slowdown", profile.contention.comm}}.dump(4) << "\n";
  if (!out) throw UsageError("cannot write profile file " + overlap);
  if (profile.forward_s < 0 || profile.update_s < 0) return;
  const std::string step = (fs::path(dir) / "step.json").string();
  if (!overwrite && fs::exists(step)) throw UsageError("refusing to overwrite existing profile file " + step);
  std::ofstream st(step);
  st << nlohmann::ordered_json{{"forward_s", profile.forward_s}, {"update_s", profile.update_s}}.dump(4) << "\n";
  if (!st) throw UsageError("cannot write profile file " + step);
}

}  // namespace dd::sync
