// CopyAverages: averages on copies (delayed merge, outer step, compression), see copy_average.h.
#include "core/sync/engine/copy_average.h"

#include <algorithm>

#include "base/clock.h"
#include "base/error.h"
#include "core/ops/device_bytes.h"

namespace dd::sync {

float* arena_ptr(const Arenas& a, const BucketPart& p) {
  switch (p.arena) {
    case Arena::Grads: return a.grads + p.off;
    case Arena::Params: return a.params + p.off;
    case Arena::Buffers: return a.buffers + p.off;
    case Arena::OptState: return a.opt_state + p.off;
  }
  return nullptr;
}

CopyAverages::~CopyAverages() {
  for (const auto& d : delayed_) wait_all_quietly(d.works);
}

CopyAverage CopyAverages::launch(Backend& g, const Bucket& bk, int64_t step, int64_t merge_step, double t_bwd,
                                 int ready_layer) {
  CopyAverage d;
  d.bucket = bk;
  d.step = step;
  d.merge_step = merge_step;
  d.launch_s = now_s();
  d.t_bwd = t_bwd;
  d.transformed = pm_.active();
  d.parts = bucket_parts(bk, true, opt_slots_, a_.num_params);
  int64_t bytes = 0;
  bool compressed_any = false;
  // theta(t) is kept only for a delayed merge (the correction needs it); an in-step average replaces the layers.
  // Where collectives move no data (a simulation), nothing is copied or computed: the collectives run on the arena
  // (never read) with the sizes they would have, a transformed payload's codec sizing its bytes.
  // A copy is made on the arenas' device, queued behind the layer's backward: its collective waits for everything
  // issued so far (ready layer -1) rather than for the layer alone.
  const bool delayed = merge_step > step, data = c_.data_path().moves_data();
  ops::Device& dev = *a_.device;
  auto copy_of = [&](const float* x, int64_t n) {
    ops::DeviceFloats v(dev);
    v.ensure(size_t(n));
    dev.copy(v.data(), x, 4 * size_t(n));
    return v;
  };
  for (auto& part : d.parts) {
    float* x = arena_ptr(a_, part);
    const bool payload = d.transformed && part.arena == Arena::Params;
    d.orig.push_back(delayed && data ? copy_of(x, part.n) : ops::DeviceFloats(dev));
    d.avg.push_back(!data ? ops::DeviceFloats(dev) : payload ? ops::DeviceFloats(dev, size_t(part.n)) : copy_of(x, part.n));
    d.staged.emplace_back();
    float* buf = data ? d.avg.back().data() : x;
    const int ready = data ? -1 : ready_layer;
    if (payload) {
      if (data) pm_.payload(x, part.off, part.n, buf);
      if (pm_.codec() != Codec::None) {
        if (data && !c_.data_path().host_memory()) {  // the codec encodes on the host: stage the payload there
          d.staged.back().resize(size_t(part.n));
          dev.copy_to_host(d.staged.back().data(), buf, 4 * size_t(part.n));
          buf = d.staged.back().data();
        }
        // One compressed average per run of adjacent layers with the same codec (compress=auto mixes them); one per
        // layer for topk (each layer sends its own top entries).
        for (int l = bk.lo; l <= bk.hi;) {
          int e = l;
          while (e < bk.hi && codec_[size_t(l)] != Codec::TopK && codec_[size_t(e + 1)] == codec_[size_t(l)]) ++e;
          const int64_t off = ranges_[size_t(l)].param_off;
          const int64_t n = ranges_[size_t(e)].param_off + ranges_[size_t(e)].param_n - off;
          if (n > 0)
            d.works.push_back(c_.compressed(g, codec_[size_t(l)], buf + (off - part.off), n, pm_.residual_send(off),
                                            pm_.residual_owner(off), &bytes, pm_.topk()));
          l = e + 1;
        }
        compressed_any = true;
        continue;
      }
    }
    bytes += 4 * part.n;
    d.works.push_back(c_.average(g, buf, part.n, part.what, ready));
  }
  if (compressed_any) d.bytes = bytes;
  return d;
}

void CopyAverages::apply(CopyAverage& d, bool in_step) {
  if (!c_.data_path().moves_data()) return;
  for (size_t i = 0; i < d.parts.size(); ++i) {
    float* x = arena_ptr(a_, d.parts[i]);
    float* avg = d.avg[i].data();
    if (!d.staged[i].empty()) ops::from_host(d.avg[i], d.staged[i].data(), d.staged[i].size());
    if (d.transformed && d.parts[i].arena == Arena::Params) pm_.finish(d.parts[i].off, d.parts[i].n, avg);
    if (in_step) a_.device->copy(x, avg, 4 * size_t(d.parts[i].n));
    else a_.device->add_diff(x, avg, d.orig[i].data(), d.parts[i].n);
  }
}

void CopyAverages::save(ByteWriter& w) {
  w.put<uint32_t>(uint32_t(delayed_.size()));
  for (auto& d : delayed_) {
    for (auto& wk : d.works)
      if (wk) wk->wait();
    w.put<int64_t>(d.step);
    w.put<int64_t>(d.merge_step);
    w.put<int32_t>(d.bucket.lo);
    w.put<int32_t>(d.bucket.hi);
    w.put<int32_t>(int32_t(d.bucket.action));
    w.put<uint8_t>(d.transformed);
    w.put<int64_t>(d.bytes);
    for (size_t i = 0; i < d.parts.size(); ++i) {
      if (!d.staged[i].empty()) {  // the average is complete: into avg, where apply() would have put it
        ops::from_host(d.avg[i], d.staged[i].data(), d.staged[i].size());
        d.staged[i].clear();
      }
    }
    for (size_t i = 0; i < d.parts.size(); ++i)
      for (const ops::DeviceFloats* v : {&d.orig[i], &d.avg[i]}) ops::put_device_floats(w, *v);
  }
}

void CopyAverages::load(ByteReader& r, int num_layers) {
  delayed_.clear();
  const uint32_t n = r.get<uint32_t>();
  if (n > uint32_t(num_layers)) throw UsageError("checkpoint: engine state holds too many delayed averages");
  for (uint32_t i = 0; i < n; ++i) {
    CopyAverage d;
    d.step = r.get<int64_t>();
    d.merge_step = r.get<int64_t>();
    const int lo = r.get<int32_t>(), hi = r.get<int32_t>(), action = r.get<int32_t>();
    if (lo < 0 || hi < lo || hi >= num_layers || !averages_params(Action(action)))
      throw UsageError("checkpoint: engine state holds a malformed delayed average");
    d.bucket.lo = lo, d.bucket.hi = hi, d.bucket.action = Action(action);
    d.transformed = r.get<uint8_t>() != 0;
    d.bytes = r.get<int64_t>();
    if (d.transformed && !pm_.active())
      throw UsageError("checkpoint: engine state holds a transformed average for a policy without one");
    d.bucket.param_off = ranges_[size_t(lo)].param_off;
    d.bucket.param_n = ranges_[size_t(hi)].param_off + ranges_[size_t(hi)].param_n - d.bucket.param_off;
    d.bucket.buffer_off = ranges_[size_t(lo)].buffer_off;
    d.bucket.buffer_n = ranges_[size_t(hi)].buffer_off + ranges_[size_t(hi)].buffer_n - d.bucket.buffer_off;
    d.parts = bucket_parts(d.bucket, true, opt_slots_, a_.num_params);
    for (auto& part : d.parts)
      for (auto* v : {&d.orig, &d.avg}) {
        v->emplace_back(*a_.device, size_t(part.n));
        ops::get_device_floats(r, v->back());
      }
    d.staged.resize(d.parts.size());
    delayed_.push_back(std::move(d));
  }
}

}  // namespace dd::sync
