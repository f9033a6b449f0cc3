// fit_comm and comm_probe_sizes (comm_fit.h).
#include "core/sync/profile/comm_fit.h"

#include <algorithm>
#include <cmath>

#include "core/common/median.h"

namespace dd::sync {
namespace {

// The least-squares line through every size, clamped to non-negative latency and rate: what the sizes support when
// none is small next to the largest, so that latency and bandwidth cannot be told apart by size.
CommFit line_fit(const std::vector<int64_t>& bytes, const std::vector<double>& c) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double x = double(bytes[i]);
    n += 1, sx += x, sy += c[i], sxx += x * x, sxy += x * c[i];
  }
  CommFit f;
  const double den = n * sxx - sx * sx;
  const double slope = den > 0 ? (n * sxy - sx * sy) / den : -1;
  if (slope >= 0) {
    f.per_byte_s = slope;
    f.alpha_s = std::max(0.0, (sy - slope * sx) / n);
  } else {  // one size, or times falling with size: a rate and no latency
    std::vector<double> rate;
    for (size_t i = 0; i < bytes.size(); ++i) rate.push_back(std::max(0.0, c[i]) / double(bytes[i]));
    f.per_byte_s = median(rate);
  }
  return f;
}

}  // namespace

CommFit fit_comm(const std::vector<int64_t>& bytes, const std::vector<double>& c) {
  std::vector<int64_t> S;
  std::vector<double> T;
  for (size_t i = 0; i < std::min(bytes.size(), c.size()); ++i)
    if (bytes[i] > 0 && std::isfinite(c[i])) S.push_back(bytes[i]), T.push_back(c[i]);
  if (S.empty()) return {};
  const int64_t largest = *std::max_element(S.begin(), S.end());
  if (std::none_of(S.begin(), S.end(), [&](int64_t s) { return 10 * s <= largest; })) return line_fit(S, T);
  std::vector<double> rate, rest;
  CommFit f;
  for (size_t i = 0; i < S.size(); ++i)
    if (2 * S[i] >= largest) rate.push_back(std::max(0.0, T[i]) / double(S[i]));
  f.per_byte_s = median(rate);
  for (size_t i = 0; i < S.size(); ++i)
    if (10 * S[i] <= largest) rest.push_back(T[i] - f.per_byte_s * double(S[i]));
  f.alpha_s = std::max(0.0, median(rest));
  return f;
}

std::vector<int64_t> comm_probe_sizes(const std::vector<int64_t>& layer_bytes, int64_t bucket_cap) {
  const int64_t floor_bytes = 1024;
  int64_t lo = 0, hi = 0, total = 0;
  for (int64_t b : layer_bytes) {
    if (b <= 0) continue;
    lo = lo ? std::min(lo, b) : b;
    hi = std::max(hi, b);
    total += b;
  }
  std::vector<int64_t> s;
  if (!hi) return {floor_bytes};
  const int64_t bucket = std::max(hi, std::min(total, bucket_cap));
  for (int64_t b : {lo, int64_t(std::sqrt(double(lo) * double(bucket))), hi, bucket})
    s.push_back(std::clamp(b, floor_bytes, kCommProbeCap));
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

}  // namespace dd::sync
