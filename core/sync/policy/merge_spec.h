// MergeSpec: how a policy's parameter averages are formed and merged (delay=, outer=, compress=), and the payload
// codecs of compressed layer sync (merge/codec.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// Payload codecs of compressed layer sync (core/sync/merge/codec.h).
enum class Codec : int8_t { None = 0, Bf16 = 1, Int8 = 2, TopK = 3 };
const char* codec_name(Codec c);

// compress=topk:p=P[,values=int8]: the P percent of a layer's entries of largest magnitude (0 < P <= 50), their
// values float32 or int8 (core/sync/merge/topk.h).
struct TopK {
  double percent = 1.0;
  bool int8 = false;
  std::string describe() const;  // "topk:p=1" or "topk:p=0.5,values=int8"
};

// The merge keys of the local policies (plsgd, dreamddp, localsgd), parsed by parse_merge():
// - delay=T: the average of a layer launched at step t is merged at the start of step t + T as a correction
//   theta += avg(theta(t)) - theta(t), keeping the local progress made meanwhile (0: today's in-step average);
// - outer=avg|nesterov[:lr=X,momentum=M]: at its sync a layer's anchor (its value at the previous sync, identical
//   on every rank) takes one Nesterov step on the pseudo-gradient anchor - avg(theta), and the layer restarts
//   from the new anchor (DiLoCo); avg is plain averaging;
// - compress=none|bf16|int8|auto|topk:p=P[,values=int8]: the average of theta - anchor is computed from encoded
//   payloads with error feedback; auto picks int8 for the layers that tolerate staleness best and bf16 for the
//   others (choose_codecs); topk sends each rank's P percent largest entries (sparse_average.h).
struct MergeSpec {
  int delay = 0;
  bool nesterov = false;
  double outer_lr = 1.0, outer_momentum = 0.0;
  Codec compress = Codec::None;
  TopK topk;  // compress=topk only
  // compress=auto: a codec per layer from its measured staleness tolerance (LayerSync; bf16 until it has measured).
  bool compress_auto = false;
  // Anchors are kept: the average is transformed (outer step or compressed delta), not taken as is.
  bool transforms() const { return nesterov || compress != Codec::None; }
  std::string describe() const;  // ",delay=2,outer=nesterov:lr=0.7,momentum=0.9,compress=int8" ("" by default)
  // compress=topk: the other codecs' error feedback has a second (owner) residual, topk's has one.
  bool owner_residual() const { return compress != Codec::None && compress != Codec::TopK; }
};

// The merge keys (MergeSpec) of a local policy whose layers sync every `h` steps: 0 <= delay < h, so a layer has at
// most one average in flight (its next one is launched h steps after the last). Throws dd::UsageError.
MergeSpec parse_merge(const PolicySpec& s, const std::string& policy, int64_t h);
// The keys parse_merge reads, for allow_only.
const std::vector<std::string>& merge_keys();

}  // namespace dd::sync
