// SensitivityProbe: probe gradients on the side (grads arena borrowed and zeroed again, BN buffers restored).
#include "core/train/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backends/backend.h"
#include "core/common/bytes.h"
#include "base/error.h"
#include "core/data/shuffle.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/batch_upload.h"
#include "core/train/trainer_parts.h"
#include "core/ops/device_bytes.h"

namespace dd::train {

std::vector<int64_t> SensitivityConfig::probe_steps(int64_t steps) const {
  std::vector<int64_t> out;
  const int maxd = *std::max_element(delays.begin(), delays.end());
  const int64_t ev = every > 0 ? every : std::max<int64_t>(maxd + 1, steps / 8);
  for (int64_t t = first; t + maxd < steps; t += ev) out.push_back(t);
  return out;
}

SensitivityConfig parse_sensitivity(const std::string& spec, int64_t steps) {
  SensitivityConfig c;
  c.on = true;
  if (spec.empty() || spec == "on") return c;
  auto num = [&](const std::string& k, const std::string& v, int64_t lo) {
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || x < lo) throw UsageError("--sensitivity: " + k + "=" + v + " must be an integer >= " + std::to_string(lo));
    return int64_t(x);
  };
  std::vector<std::string> items;
  std::stringstream ss(spec);
  for (std::string it; std::getline(ss, it, ',');) items.push_back(it);
  std::string key;
  bool delays_given = false;
  for (auto& it : items) {
    auto eq = it.find('=');
    if (eq == std::string::npos) {
      if (key != "delays") throw UsageError("--sensitivity: expected key=value, got '" + it + "'");
      c.delays.push_back(int(num("delays", it, 1)));  // delays=1,2,4,8: the bare numbers after delays=
      continue;
    }
    key = it.substr(0, eq);
    std::string v = it.substr(eq + 1);
    if (key == "delays") {
      c.delays.clear();
      delays_given = true;
      std::stringstream ds(v);
      for (std::string d; std::getline(ds, d, '/');) c.delays.push_back(int(num("delays", d, 1)));
    } else if (key == "every") c.every = num(key, v, 1);
    else if (key == "first") c.first = num(key, v, 0);
    else if (key == "batch") c.batch = num(key, v, 1);
    else if (key == "probe") {
      if (v != "fixed" && v != "minibatch") throw UsageError("--sensitivity: probe=" + v + " (expected fixed or minibatch)");
      c.minibatch = v == "minibatch";
    } else {
      throw UsageError("--sensitivity: unknown key '" + key + "' (known: delays, every, first, probe, batch)");
    }
  }
  (void)delays_given;
  if (c.every > 0 && c.every <= *std::max_element(c.delays.begin(), c.delays.end()))
    throw UsageError("--sensitivity: every=" + std::to_string(c.every) + " must exceed the largest delay");
  if (c.delays.empty()) throw UsageError("--sensitivity: delays must not be empty");
  std::sort(c.delays.begin(), c.delays.end());
  c.delays.erase(std::unique(c.delays.begin(), c.delays.end()), c.delays.end());
  if (c.probe_steps(steps).empty())
    throw UsageError("--sensitivity: no probe fits in " + std::to_string(steps) + " steps (largest delay " +
                     std::to_string(c.delays.back()) + ", first=" + std::to_string(c.first) + ")");
  return c;
}

struct SensitivityProbe::Impl {
  SensitivityConfig cfg;
  models::Model& m;
  ops::Device& dev;  // the model's: snapshots and cosines stay there, only the cosines cross to the host
  Backend* b;
  telemetry::MetricsWriter* w;
  std::vector<int64_t> starts;
  data::Batch probe;            // the fixed probe batch
  BatchUpload probe_in, minibatch_in;
  models::Input probe_input;    // the fixed batch in the model's memory (uploaded once)
  ops::DeviceFloats ref;        // g(t0) of the open probe
  int64_t open_t0 = -1;
  std::vector<std::pair<int32_t, std::vector<float>>> measured;  // (delay, mean cosines) of the open probe
  ops::DeviceFloats buffers_backup;

  Impl(const SensitivityConfig& c, models::Model& m, Backend* b, telemetry::MetricsWriter* w)
      : cfg(c), m(m), dev(m.device()), b(b), w(w), probe_in(dev), minibatch_in(dev), ref(dev),
        buffers_backup(dev) {}

  // Gradient of the mean loss over `in` (in chunks), left in m.grads(); BN buffers restored afterwards.
  void gradient(const models::Input& in) {
    const size_t nb = m.buffers().size();
    if (nb) {
      buffers_backup.ensure(nb);
      dev.copy(buffers_backup.data(), m.buffers().data(), 4 * nb);
    }
    const int64_t chunk = m.takes_tokens() ? 16 : 256;
    const int64_t x_numel = in.x ? [&] { int64_t n = 1; for (auto s : m.input_shape()) n *= s; return n; }() : 0;
    const int64_t t_numel = in.tokens ? m.input_shape()[0] : 0;
    for (int64_t first = 0; first < in.n; first += chunk) {
      models::Input c;
      c.n = std::min(chunk, in.n - first);
      c.x = in.x ? in.x + first * x_numel : nullptr;
      c.tokens = in.tokens ? in.tokens + first * t_numel : nullptr;
      c.y = in.y + first * m.targets_per_sample();
      m.forward(c, true);
      m.backward(nullptr, float(c.n) / float(in.n));
    }
    if (nb) dev.copy(m.buffers().data(), buffers_backup.data(), 4 * nb);
  }

  void record(int64_t t0, int delay, const std::vector<float>& cos) {
    if (w) w->record_cosine(cfg.minibatch ? telemetry::ProbeKind::kMinibatch : telemetry::ProbeKind::kFixedBatch, t0,
                            delay, cos);
  }

  std::vector<float> cosines() {
    std::vector<float> out;
    for (auto* l : m.layers()) {
      double s[3];  // (g.g, r.r, g.r), in double on the model's device
      dev.dot3(l->grads(), ref.data() + l->param_offset(), l->num_params(), s);
      out.push_back(s[0] > 0 && s[1] > 0 ? float(s[2] / std::sqrt(s[0] * s[1])) : NAN);
    }
    if (b && b->size() > 1) b->allreduce(out.data(), out.size(), ReduceOp::Avg)->wait();
    return out;
  }
};

SensitivityProbe::SensitivityProbe(const SensitivityConfig& cfg, models::Model& m, const data::Dataset& train,
                                   uint64_t seed, int64_t steps, Backend* b)
    : impl_(std::make_unique<Impl>(cfg, m, b, nullptr)) {
  impl_->starts = cfg.probe_steps(steps);
  if (!cfg.minibatch) {
    auto idx = data::fixed_subset(train.size, std::min(cfg.batch, train.size), seed ^ 0x5E15u);
    data::gather(train, idx.data(), int64_t(idx.size()), &impl_->probe);
    impl_->probe_input = impl_->probe_in.upload(impl_->probe);
  }
}

void SensitivityProbe::attach(telemetry::MetricsWriter* w) {
  auto& I = *impl_;
  I.w = w;
  if (!w) return;
  w->declare_sensitivity(I.cfg.minibatch ? telemetry::ProbeKind::kMinibatch : telemetry::ProbeKind::kFixedBatch,
                         std::vector<int32_t>(I.cfg.delays.begin(), I.cfg.delays.end()), I.m.num_layers());
  for (const auto& [d, cos] : I.measured) I.record(I.open_t0, d, cos);
}

SensitivityProbe::~SensitivityProbe() = default;

void SensitivityProbe::before_step(int64_t step, const data::Batch& minibatch) {
  auto& I = *impl_;
  const bool start = std::binary_search(I.starts.begin(), I.starts.end(), step);
  int delay = -1;
  if (I.open_t0 >= 0)
    for (int d : I.cfg.delays)
      if (step == I.open_t0 + d) delay = d;
  if (!start && delay < 0) return;
  const models::Input in = I.cfg.minibatch ? I.minibatch_in.upload(minibatch) : I.probe_input;
  // The training step's gradients start at zero (the optimizer zeroes them); the probe borrows the arena.
  I.gradient(in);
  if (delay > 0) {
    auto cos = I.cosines();
    I.record(I.open_t0, delay, cos);
    I.measured.push_back({delay, std::move(cos)});
    if (delay == I.cfg.delays.back()) I.open_t0 = -1;
  }
  if (start) {
    I.ref.ensure(I.m.grads().size());
    I.dev.copy(I.ref.data(), I.m.grads().data(), 4 * I.m.grads().size());
    I.open_t0 = step;
    I.measured.clear();
  }
  I.m.grads().zero();
}

// The probe configuration a saved state belongs to.
static std::string identity(const SensitivityConfig& c, const std::vector<int64_t>& starts, size_t grads) {
  std::string s = c.minibatch ? "minibatch" : "fixed batch=" + std::to_string(c.batch);
  s += " grads=" + std::to_string(grads) + " delays=";
  for (int d : c.delays) s += std::to_string(d) + ",";
  // The probe steps as count + FNV-1a hash: a long run has many, and the identity is stored in every checkpoint.
  uint64_t h = 1469598103934665603ull;
  for (int64_t t : starts)
    for (int i = 0; i < 8; ++i) h = (h ^ ((uint64_t(t) >> (8 * i)) & 0xff)) * 1099511628211ull;
  s += " starts=" + std::to_string(starts.size()) + ":" + std::to_string(h);
  return s;
}

std::string SensitivityProbe::save_state() const {
  const auto& I = *impl_;
  ByteWriter w;
  w.put_str(identity(I.cfg, I.starts, I.m.grads().size()));
  w.put<int64_t>(I.open_t0);
  if (I.open_t0 >= 0) {
    ops::put_device_floats(w, I.ref, I.m.grads().size());  // the open probe's g(t0), all of it
    w.put<uint64_t>(I.measured.size());
    for (const auto& [d, cos] : I.measured) {
      w.put<int32_t>(d);
      w.put_vec(cos);
    }
  }
  return w.bytes();
}

void SensitivityProbe::load_state(const std::string& state) {
  auto& I = *impl_;
  ByteReader r(state);
  if (r.get_str() != identity(I.cfg, I.starts, I.m.grads().size())) return;  // another probe configuration: start afresh
  const int64_t t0 = r.get<int64_t>();
  std::vector<std::pair<int32_t, std::vector<float>>> measured;
  if (t0 >= 0) {
    if (!std::binary_search(I.starts.begin(), I.starts.end(), t0))
      throw std::runtime_error("sensitivity probe state: step " + std::to_string(t0) + " is not a probe step");
    I.ref.ensure(I.m.grads().size());
    ops::get_device_floats(r, I.ref, I.m.grads().size());
    const uint64_t n = r.get<uint64_t>();
    for (uint64_t i = 0; i < n && i < I.cfg.delays.size(); ++i) {
      const int32_t d = r.get<int32_t>();
      auto cos = r.get_vec<float>();
      if (cos.size() != size_t(I.m.num_layers()) ||
          std::find(I.cfg.delays.begin(), I.cfg.delays.end(), d) == I.cfg.delays.end())
        throw std::runtime_error("sensitivity probe state is malformed (layers or delay)");
      measured.push_back({d, std::move(cos)});
    }
    if (measured.size() != n) throw std::runtime_error("sensitivity probe state: more delays than configured");
  }
  if (!r.done()) throw std::runtime_error("sensitivity probe state has trailing bytes");
  I.open_t0 = t0;
  I.measured = std::move(measured);
}

}  // namespace dd::train
