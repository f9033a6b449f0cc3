// AutoCodecs: the codec of each layer's compressed payload. Fixed by compress=bf16|int8, or with compress=auto
// chosen from each layer's agreed cosine between successive local gradients over kSteps steps (its staleness
// tolerance, choose_codecs), bf16 meanwhile. The cosines ride in the control all-reduce, so every rank decides the
// same codecs at the same step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/bytes.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

class AutoCodecs {
 public:
  static constexpr int kSteps = 10;
  // A new policy: every layer gets `m.compress` (bf16 under compress=auto until it has measured); the measurement
  // starts after `step` (that step has no previous gradient).
  void reset(const MergeSpec& m, int layers, int64_t step);
  bool measuring() const { return !decided_; }
  // Control-vector floats per step: one per layer under compress=auto (also after it decided: the layout is fixed
  // per policy), else 0.
  size_t votes() const { return votes_; }
  // The rank sums of the cosines cast at `step`. Returns true when this call decided the codecs.
  bool add(int64_t step, const float* sums, int world);
  // What was decided, for the log: "compress=auto after 10 steps (...): fc1=int8(0.93) ...".
  std::string describe(const std::vector<LayerMeta>& layers) const;
  // The same as one JSON object, for metrics.h5's /decisions: {"steps": n, "codec": {name: codec},
  // "mean_cos": {name: cos}}.
  std::string decisions(const std::vector<LayerMeta>& layers) const;
  // By layer; the vector object lives as long as this (CopyAverages keeps a reference).
  const std::vector<Codec>& codecs() const { return codec_; }

  void save(ByteWriter& w) const;
  void load(ByteReader& r);

 private:
  std::vector<Codec> codec_;
  size_t votes_ = 0;
  std::vector<double> sum_;
  int n_ = 0;
  int64_t from_ = 0;
  bool decided_ = true;
};

}  // namespace dd::sync
