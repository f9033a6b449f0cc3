// parse_cluster / parse_slow / parse_bandwidth / parse_duration: strict (a typo is a usage error, never a default).
#include "app/sim/platform_spec.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "base/error.h"

namespace dd::sim {
namespace {

// Leading number of `v` and the rest; false when there is no finite number.
bool split_number(const std::string& v, double& x, std::string& unit) {
  if (v.empty()) return false;
  const std::string s = v;  // outlives `end`, which points into it
  char* end = nullptr;
  errno = 0;
  x = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno == ERANGE || !std::isfinite(x)) return false;
  unit = std::string(end);
  return true;
}

int positive_int(const std::string& s, const std::string& what, long most = 65536) {
  char* end = nullptr;
  errno = 0;
  const std::string t = s;
  long v = std::strtol(t.c_str(), &end, 10);
  if (t.empty() || !end || *end || errno == ERANGE || v < 1 || v > most)
    throw UsageError(what + ": '" + s + "' is not an integer in [1, " + std::to_string(most) + "]");
  return int(v);
}

}  // namespace

double parse_bandwidth(const std::string& v, const std::string& what) {
  double x = 0;
  std::string u;
  if (!split_number(v, x, u) || x <= 0)
    throw UsageError(what + ": bandwidth '" + v + "' is not a positive number with a unit (e.g. 1Gbps, 300GBps)");
  static const std::vector<std::pair<std::string, double>> units = {
      {"bps", 1.0 / 8},   {"kbps", 1e3 / 8},  {"Kbps", 1e3 / 8},  {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8},
      {"Tbps", 1e12 / 8}, {"kbit", 1e3 / 8},  {"mbit", 1e6 / 8},  {"gbit", 1e9 / 8}, {"Mbit", 1e6 / 8},
      {"Gbit", 1e9 / 8},  {"Bps", 1},         {"kBps", 1e3},      {"KBps", 1e3},     {"MBps", 1e6},
      {"GBps", 1e9},      {"TBps", 1e12}};
  for (auto& [name, f] : units)
    if (u == name) return x * f;
  throw UsageError(what + ": bandwidth '" + v + "' needs a unit: bps, kbps, Mbps, Gbps, Tbps (bits/s) or Bps, kBps, "
                   "MBps, GBps, TBps (bytes/s)");
}

double parse_duration(const std::string& v, const std::string& what) {
  double x = 0;
  std::string u;
  if (!split_number(v, x, u) || x < 0)
    throw UsageError(what + ": duration '" + v + "' is not a non-negative number with a unit (s, ms, us, ns)");
  if (u == "s") return x;
  if (u == "ms") return x * 1e-3;
  if (u == "us") return x * 1e-6;
  if (u == "ns") return x * 1e-9;
  throw UsageError(what + ": duration '" + v + "' needs a unit: s, ms, us or ns");
}

PlatformSpec parse_cluster(const std::string& spec) {
  const std::string what = "--cluster " + spec;
  PlatformSpec p;
  std::vector<std::string> parts;
  size_t a = 0;
  while (true) {
    size_t c = spec.find(',', a);
    parts.push_back(spec.substr(a, c == std::string::npos ? std::string::npos : c - a));
    if (c == std::string::npos) break;
    a = c + 1;
  }
  const std::string& shape = parts[0];
  const size_t x = shape.find('x');
  if (x == std::string::npos)
    throw UsageError(what + ": expected NxG[,intra=BW][,inter=BW][,lat=T] (N nodes of G ranks), e.g. 16x8,inter=1Gbps");
  p.nodes = positive_int(shape.substr(0, x), what + ": N");
  p.per_node = positive_int(shape.substr(x + 1), what + ": G");
  // In 64 bits: 65536x65536 wraps an int to 0 and would pass (and hang building 4 billion hosts).
  if (int64_t(p.nodes) * int64_t(p.per_node) > 65536)
    throw UsageError(what + ": " + std::to_string(int64_t(p.nodes) * p.per_node) + " ranks, more than 65536");
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string key = eq == std::string::npos ? parts[i] : parts[i].substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (eq == std::string::npos || val.empty())
      throw UsageError(what + ": '" + parts[i] + "' is not key=value (keys: intra, inter, lat)");
    if (key == "intra") p.intra_Bps = parse_bandwidth(val, what);
    else if (key == "inter") p.inter_Bps = parse_bandwidth(val, what);
    else if (key == "lat") p.lat_s = parse_duration(val, what);
    else throw UsageError(what + ": unknown key '" + key + "' (keys: intra, inter, lat)");
  }
  return p;
}

void parse_slow(const std::string& arg, PlatformSpec& p) {
  const std::string what = "--slow " + arg;
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError(what + ": expected RANK=FACTOR, e.g. 3=1.5");
  char* end = nullptr;
  const std::string r = arg.substr(0, eq), f = arg.substr(eq + 1);
  errno = 0;
  long rank = std::strtol(r.c_str(), &end, 10);
  if (!end || *end || errno == ERANGE || rank < 0 || rank > 65535)
    throw UsageError(what + ": RANK '" + r + "' is not a non-negative integer");
  double factor = 0;
  std::string rest;
  if (!split_number(f, factor, rest) || !rest.empty() || factor <= 0 || factor > 1e6)
    throw UsageError(what + ": FACTOR '" + f + "' is not a positive number (1.5 = 50% slower compute)");
  p.slow[int(rank)] = factor;
}

void parse_shared_cores(const std::string& arg, PlatformSpec& p) {
  const std::string what = "--shared-cores " + arg;
  const size_t comma = arg.find(',');
  p.shared_cores = positive_int(arg.substr(0, comma), what + ": CORES", 4096);
  p.rank_threads = 1;
  if (comma == std::string::npos) return;
  const std::string rest = arg.substr(comma + 1);
  if (rest.rfind("threads=", 0) != 0) throw UsageError(what + ": expected CORES or CORES,threads=T, e.g. 2,threads=1");
  p.rank_threads = positive_int(rest.substr(8), what + ": threads", 4096);
  if (p.rank_threads > p.shared_cores)
    throw UsageError(what + ": a rank's threads cannot outnumber the machine's cores");
}

}  // namespace dd::sim
