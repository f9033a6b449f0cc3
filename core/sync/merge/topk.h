// The sparse payload of compress=topk (docs/design.md "Delayed merge, outer optimizer, compression"): of n floats,
// the K = ceil(n * percent / 100) of largest magnitude (ties to the lower index; NaN counts as largest, so the
// anomaly guard sees it), sent as their values in index order followed by their indices.
// - Values: float32 (4 bytes each), or with values=int8 as the int8 codec's blocks (codec.h: a float32 scale per
//   kInt8Block kept values, then one code per value).
// - Indices: Elias-Fano, whose size is fixed by n and K alone (so the all-gather has one block size, and a
//   simulation knows it): with L = floor(log2(n / K)) low bits per index and the high parts in unary,
//   K * L + K + ((n - 1) >> L) + 1 bits, i.e. at most 2 + log2(n / K) bits per kept entry (about 1.07 bytes at
//   1%, against 4 for a 32-bit index).
// Pure functions, deterministic on every machine (the selection is a total order; no float reductions).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

// K of n at t.percent: at least 1 (n > 0), at most n.
size_t topk_count(size_t n, const TopK& t);
// Bytes of one payload of n values: values plus indices.
size_t topk_bytes(size_t n, const TopK& t);
size_t elias_fano_bytes(size_t n, size_t k);

// Encodes the top-K of x[0..n) into out (topk_bytes) and leaves in `sent` (n floats) what a decoder reads back:
// the decoded value at a kept index, 0 elsewhere.
void topk_encode(const float* x, size_t n, const TopK& t, uint8_t* out, float* sent);
// Adds the payload's decoded values into sum[0..n) at their indices. Throws std::runtime_error on indices that
// are not strictly increasing below n (a corrupt payload).
void topk_decode_add(const uint8_t* in, size_t n, const TopK& t, double* sum);

// Elias-Fano coding of k strictly increasing indices below n into elias_fano_bytes(n, k) bytes, and back.
void elias_fano_encode(const uint32_t* idx, size_t k, size_t n, uint8_t* out);
void elias_fano_decode(const uint8_t* in, size_t k, size_t n, uint32_t* idx);

}  // namespace dd::sync
