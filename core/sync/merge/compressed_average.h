// The compressed average of compress=bf16|int8 (docs/design.md "Delayed merge, outer optimizer, compression"): a quantized reduce-scatter
// (an all-to-all of every rank's encoded shards; each shard's owner decodes the world's contributions, averages
// them in rank order and encodes the result) followed by an all-gather of the encoded averaged shards. Every rank
// decodes the same bytes, so the result is bitwise equal on all ranks. Why this and not an all-gather of whole
// encoded payloads: each rank sends 2(N-1)/N of the encoded size, the ring all-reduce's factor, so the bytes on the
// wire shrink by the codec's ratio at any world size (an all-gather of whole payloads sends (N-1)x: no gain above 8
// ranks for int8).
//
// Error feedback, both stages: the rank's residual e1 (what its encoded payload left out) is added to its next
// payload; the owner's residual e2 (what the encoded average left out, in the shard it owns) to its next average.
// The sum of the results over many syncs then stays within one quantization step of the sum of the true averages.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backends/backend.h"
#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

// Floats per shard for n values over `world` ranks: ceil(n / world) (each shard is encoded on its own, its int8
// blocks counted from its start).
size_t compressed_shard(size_t n, int world);
// Bytes this rank contributes (the encoded size of its padded payload): the figure /sync_events reports, comparable
// to 4n of a float32 all-reduce.
int64_t compressed_bytes(Codec c, size_t n, int world);

// Asynchronous, on g's communication thread: out[0..n) = the compressed average over g's ranks of x[0..n), with
// residuals e1 and e2 (n floats each, this rank's; only the owned shard of e2 is read and written). x, e1, e2 and
// out must stay untouched until the Work completes.
WorkPtr compressed_average(Backend& g, Codec c, const float* x, size_t n, float* e1, float* e2, float* out);

// The same operation where collectives move no data (a simulation): the same run_bytes of the same size, the same
// all-to-all and all-gather of the same block size, with no payload, no encoding and no residuals.
WorkPtr compressed_average_sizes(Backend& g, Codec c, size_t n);

}  // namespace dd::sync
