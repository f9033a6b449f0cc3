// ParamMerge: how a local layer's average becomes its new parameters when the policy transforms it (outer=nesterov,
// compress=bf16|int8|topk; docs/design.md "Delayed merge, outer optimizer, compression"). It owns the per-parameter state that needs: the anchors
// (each layer's value at its previous sync, identical on every rank), the outer momentum and the two residuals of
// error feedback, and their checkpoint. LayerSync decides when a layer syncs; ParamMerge only what the sync computes.
//
// One sync of parameters [off, off + n), launched on theta(t) (`orig`):
//   payload(orig, buf)   buf = orig - anchor (compress) or orig (outer only), to be averaged in place over the ranks;
//   finish(buf)          avg = anchor + buf (compress) or buf; then outer=nesterov: g = anchor - avg, m = mu m + g,
//                        anchor -= lr (g + mu m), buf = anchor; outer=avg: anchor = buf = avg. buf is then the layer's
//                        new synchronized value, equal on all ranks.
#pragma once
#include <cstdint>
#include <vector>
#include <vector>

#include "core/common/bytes.h"
#include "core/ops/device.h"
#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

class ParamMerge {
 public:
  // The per-parameter state lives on `dev`, the parameters' device, and is computed there (core/ops arena kernels).
  ParamMerge(int64_t num_params, ops::Device& dev) : n_(num_params), dev_(dev) {}
  // For a (new) policy's merge spec: allocates what it needs (fresh anchors are copies of `params`, which must be
  // identical on every rank when the spec starts transforming), frees what it does not. `sizes_only`: collectives
  // move no data (a simulation): the spec still decides which averages are transformed and how many bytes they
  // send, but nothing is allocated and anchor() is a no-op (payload() and finish() are never called).
  void configure(const MergeSpec& m, const float* params, bool sizes_only = false);
  bool active() const { return m_.transforms(); }
  Codec codec() const { return m_.compress; }
  const TopK& topk() const { return m_.topk; }
  // Parameters [off, off + n) are identical on every rank now: they become the anchors.
  void anchor(const float* params, int64_t off, int64_t n);
  void payload(const float* orig, int64_t off, int64_t n, float* buf) const;
  void finish(int64_t off, int64_t n, float* buf);
  // Residuals of error feedback at parameter `off` (compress only; see compressed_average; compress=topk has no
  // owner residual: sparse_average).
  // They are host memory: the codecs encode and exchange bytes on the host, whatever the parameters' device.
  float* residual_send(int64_t off) { return e1_.empty() ? nullptr : e1_.data() + off; }
  float* residual_owner(int64_t off) { return e2_.empty() ? nullptr : e2_.data() + off; }

  void save(ByteWriter& w) const;
  void load(ByteReader& r);  // after configure() with the saved spec

 private:
  int64_t n_;
  ops::Device& dev_;
  MergeSpec m_;
  ops::DeviceFloats anchor_, mom_;  // on dev_
  std::vector<float> e1_, e2_;      // host (the codecs')
};


}  // namespace dd::sync
