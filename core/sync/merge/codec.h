// Payload codecs of compressed layer sync (compress=bf16|int8): how n floats become bytes on the wire and back.
// int8: blocks of kInt8Block values, each sent as its float32 scale max|x|/127 and n int8 codes round(x/scale)
// (layout: all scales, then all codes); decode(encode(x)) is within scale/2 of x per value. bf16: the upper 16
// bits of each float32, rounded to nearest even; within 2^-8 relative. Non-finite values stay non-finite (the
// anomaly guard sees them). Pure functions, deterministic on every machine (no reductions in float order that a
// compiler could reassociate: the scale is a max).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

constexpr size_t kInt8Block = 256;

// Bytes of n values encoded with c (c != None).
size_t encoded_bytes(Codec c, size_t n);
void encode(Codec c, const float* x, size_t n, uint8_t* out);
void decode(Codec c, const uint8_t* in, size_t n, float* out);
// compress=auto: from each layer's agreed mean cosine between successive local gradients (the stability signal of
// the threshold and hier policies; a layer whose gradient direction changes slowly tolerates a stale or coarse
// update best), int8 for the layers at or above the median, bf16 for the rest.
std::vector<Codec> choose_codecs(const std::vector<double>& mean_cos);

// The largest |x - decode(encode(x))| the codec allows for these n values (the bound the tests check).
double codec_error_bound(Codec c, const float* x, size_t n);

}  // namespace dd::sync
