// ProfileCarry: a self-profile handed from one engine to the next across a change of world size, scaled instead
// of measured again (docs/elastic.md). A world that loses a member keeps its per-rank batch, so each layer's
// backward time stands; the all-reduce model is refitted from the agreed per-layer times (comm_fit.h) and scaled as
// a ring all-reduce scales: the latency with its 2(n-1) steps, the bytes with the 2(n-1)/n of the buffer each rank
// sends.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sync/policy/layer_meta.h"
#include "core/sync/types/layer_times.h"

namespace dd::sync {

struct ProfileCarry {
  LayerTimes times;  // the agreed profile, bitwise the same on every rank
  int world = 0;     // the world it was measured (or scaled) for; 0: none yet
  bool has() const { return world > 1 && !times.backward_s.empty(); }
  // A short text that is equal on two ranks exactly when their carried profiles are (the survivors compare it
  // before they rely on it).
  std::string fingerprint() const;
  // The carried profile as text, every double bit for bit ("" for none), and back: how a joiner receives the live
  // world's profile. decode() throws std::invalid_argument on a malformed text.
  std::string encode() const;
  static ProfileCarry decode(const std::string& text);
};

// `t`, measured on `from` ranks, as the model predicts it on `to` ranks (both >= 2): backward times and contention
// as they are; comm_l = alpha (to-1)/(from-1) + bytes_l per_byte ((to-1)/to) / ((from-1)/from), with alpha and
// per_byte fitted from t.comm_s over the layers' bytes; `t` itself when from == to. Deterministic: ranks with one
// profile get one answer.
LayerTimes scale_profile(const LayerTimes& t, const std::vector<LayerMeta>& layers, int from, int to);

}  // namespace dd::sync
