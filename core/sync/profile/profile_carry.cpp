// ProfileCarry and scale_profile (profile_carry.h).
#include "core/sync/profile/profile_carry.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "core/common/crc.h"
#include "core/sync/profile/comm_fit.h"

namespace dd::sync {

std::string ProfileCarry::fingerprint() const {
  if (!has()) return "none";
  uint32_t h = 0;  // CRC-32 over the doubles' bytes
  auto mix = [&](double x) { h = crc32_of(&x, sizeof x, h); };
  for (double x : times.backward_s) mix(x);
  for (double x : times.comm_s) mix(x);
  mix(times.contention.compute);
  mix(times.contention.comm);
  char s[64];
  std::snprintf(s, sizeof s, "%d:%zu:%08x", world, times.backward_s.size(), unsigned(h));
  return s;
}

namespace {

void put(std::string& s, double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  char b[20];
  std::snprintf(b, sizeof b, "%016llx,", (unsigned long long)u);
  s += b;
}

double take(const std::string& s, size_t* at) {
  const size_t end = s.find(',', *at);
  if (end == std::string::npos || end - *at != 16) throw std::invalid_argument("profile text: malformed number");
  const uint64_t u = std::stoull(s.substr(*at, 16), nullptr, 16);
  *at = end + 1;
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace

std::string ProfileCarry::encode() const {
  if (!has()) return "";
  std::string s = std::to_string(world) + ";" + std::to_string(times.backward_s.size()) + ";";
  for (double x : times.backward_s) put(s, x);
  for (double x : times.comm_s) put(s, x);
  put(s, times.contention.compute);
  put(s, times.contention.comm);
  return s;
}

ProfileCarry ProfileCarry::decode(const std::string& text) {
  ProfileCarry c;
  if (text.empty()) return c;
  const size_t a = text.find(';'), b = text.find(';', a == std::string::npos ? 0 : a + 1);
  if (a == std::string::npos || b == std::string::npos) throw std::invalid_argument("profile text: no header");
  c.world = std::stoi(text.substr(0, a));
  const size_t n = std::stoul(text.substr(a + 1, b - a - 1));
  if (text.size() - (b + 1) != (2 * n + 2) * 17) throw std::invalid_argument("profile text: wrong length");
  size_t at = b + 1;
  for (size_t i = 0; i < n; ++i) c.times.backward_s.push_back(take(text, &at));
  for (size_t i = 0; i < n; ++i) c.times.comm_s.push_back(take(text, &at));
  c.times.contention.compute = take(text, &at);
  c.times.contention.comm = take(text, &at);
  return c;
}

LayerTimes scale_profile(const LayerTimes& t, const std::vector<LayerMeta>& layers, int from, int to) {
  if (from < 2 || to < 2) throw std::invalid_argument("scale_profile: worlds of at least 2 ranks");
  if (layers.size() != t.comm_s.size()) throw std::invalid_argument("scale_profile: the profile is of another model");
  if (from == to) return t;
  std::vector<int64_t> bytes;
  for (const auto& l : layers) bytes.push_back(l.bytes);
  const CommFit fit = fit_comm(bytes, t.comm_s);
  const double latency = double(to - 1) / double(from - 1);
  const double volume = (double(to - 1) / to) / (double(from - 1) / from);
  LayerTimes s = t;
  for (size_t l = 0; l < bytes.size(); ++l)
    s.comm_s[l] = fit.alpha_s * latency + fit.per_byte_s * double(bytes[l]) * volume;
  return s;
}

}  // namespace dd::sync
