// The median of a sample (the mean of the two middle values when their number is even; 0 for none).
#pragma once
#include <algorithm>
#include <vector>

namespace dd {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace dd
