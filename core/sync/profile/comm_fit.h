// CommFit: the all-reduce time model c(bytes) = alpha + bytes x per_byte, one fit shared by the engine's
// self-profile, `dreamddp profile`, the schedule model's fused buckets (schedule_choice.h) and `dreamddp schedule`.
//
// The fit is robust to what a shaped link does to a line: a large transfer hides the per-collective latency, so a
// least-squares line through small and large sizes comes out steeper than any large transfer ran (1.045 Gbit/s
// fitted on a 1 Gbit/s link whose large layers ran at 0.94) and its intercept absorbs the difference. Here the
// bandwidth comes from the large sizes and the latency from the small ones.
#pragma once
#include <cstdint>
#include <vector>

namespace dd::sync {

struct CommFit {
  double alpha_s = 0;     // seconds per collective, whatever its size (>= 0)
  double per_byte_s = 0;  // seconds per byte of the buffer reduced (>= 0)
  double at(int64_t bytes) const { return alpha_s + per_byte_s * double(bytes); }
};

// The fit of times c over sizes `bytes` (pairs with a size > 0 and a finite time count): per_byte is the median of
// c/S over the sizes at least half the largest; alpha is the median of c - S x per_byte over the sizes at most a
// tenth of the largest, at least 0. When no size is that small, latency and bandwidth cannot be told apart by size:
// the least-squares line, clamped to alpha >= 0 (one size, or a falling line: its rate and alpha 0). Deterministic:
// ranks with one profile get one fit.
CommFit fit_comm(const std::vector<int64_t>& bytes, const std::vector<double>& c);

// The sizes in bytes the engine times for its fit, from the model's own sizes: the smallest layer (latency), the
// largest layer and the largest bucket the engine sends (the whole model fused up to `bucket_cap`: Local SGD's
// average and fused phases), and their geometric mean; each within [1 KiB, kCommProbeCap], ascending, distinct.
// The same on every rank (layer sizes are). kCommProbeCap keeps the probe short on a slow link (16 MiB takes 1.3 s
// at 100 Mbit/s); past a few MiB a ring all-reduce runs at its steady rate.
constexpr int64_t kCommProbeCap = int64_t(16) << 20;
std::vector<int64_t> comm_probe_sizes(const std::vector<int64_t>& layer_bytes, int64_t bucket_cap);

}  // namespace dd::sync
