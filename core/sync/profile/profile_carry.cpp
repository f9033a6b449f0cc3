// ProfileCarry and scale_profile (profile_carry.h).
#include "core/sync/profile/profile_carry.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "core/sync/profile/comm_fit.h"

namespace dd::sync {

std::string ProfileCarry::fingerprint() const {
  if (!has()) return "none";
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the doubles' bytes
  auto mix = [&](double x) {
    unsigned char b[sizeof x];
    std::memcpy(b, &x, sizeof x);
    for (unsigned char c : b) h = (h ^ c) * 1099511628211ull;
  };
  for (double x : times.backward_s) mix(x);
  for (double x : times.comm_s) mix(x);
  mix(times.contention.compute);
  mix(times.contention.comm);
  char s[64];
  std::snprintf(s, sizeof s, "%d:%zu:%016llx", world, times.backward_s.size(), (unsigned long long)h);
  return s;
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
