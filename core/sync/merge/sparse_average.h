// The sparse average of compress=topk (docs/design.md "Delayed merge, outer optimizer, compression"): every rank
// adds its residual to its payload, keeps the top-K entries (topk.h) and all-gathers them; every rank then decodes
// the world's sparse sets and sums them in rank order (in double), so the result is bitwise equal on all ranks.
// Error feedback: what the rank did not send (and, with values=int8, the quantization error of what it sent) stays
// in its residual e1 and joins its next payload; the sum of what it sent over many syncs plus its residual is the
// sum of its payloads (up to the float rounding of payload + residual).
//
// Bytes: an all-gather sends (N-1) payloads per rank where a ring all-reduce sends 2(N-1)/N times its size, so the
// figure /sync_events reports, comparable to 4n of a float32 all-reduce, is N/2 payloads: one payload at 2 ranks,
// growing with the world (top-K sets of different ranks do not add up in place).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backends/backend.h"
#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

// The all-reduce-equivalent bytes of one sparse average of n floats over `world` ranks (see above).
int64_t sparse_bytes(const TopK& t, size_t n, int world);

// Asynchronous, on g's communication thread: out[0..n) = the sparse average over g's ranks of x[0..n) with this
// rank's residual e1 (n floats). x, e1 and out must stay untouched until the Work completes; out may be x.
WorkPtr sparse_average(Backend& g, const TopK& t, const float* x, size_t n, float* e1, float* out);

// The same operation where collectives move no data (a simulation): the same all-gather of the same block size,
// with no payload, no selection and no residual.
WorkPtr sparse_average_sizes(Backend& g, const TopK& t, size_t n);

}  // namespace dd::sync
