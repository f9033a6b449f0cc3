// RowBuffers: what MetricsWriter's append_* calls copy rows into, and how a flush takes them out.
#include "core/telemetry/row_buffers.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "base/error.h"

namespace dd::telemetry {
namespace {

std::string shape_text(const std::vector<int32_t>& delays, int32_t num_layers) {
  std::string d;
  for (int32_t x : delays) d += (d.empty() ? "" : ",") + std::to_string(x);
  return "delays=" + d + " over " + std::to_string(num_layers) + " layers";
}

}  // namespace

void RowBuffers::seed(ImportedRun&& run, const std::string& from) {
  std::lock_guard<std::mutex> lk(mutex_);
  RowBatch& m = pending_;
  for (auto& [k, v] : run.attrs) m.attrs[k] = std::move(v);
  for (auto& [k, v] : run.decisions) m.decisions[k] = std::move(v);
  m.layers = std::move(run.layers);
  m.layers_dirty = !m.layers.empty();
  m.steps = std::move(run.steps);
  m.sync_events = std::move(run.sync_events);
  m.evals = std::move(run.evals);
  m.layer_ready = std::move(run.layer_ready);
  m.events = std::move(run.events);
  for (int k = 0; k < 2; ++k) {
    ImportedProbes& p = run.probes[k];
    if (!p.present) continue;
    Sensitivity& s = sens_[k];
    s.declared = true;
    s.imported_from = from;
    s.delays = std::move(p.delays);
    s.num_layers = p.num_layers;
    s.done_steps = std::move(p.steps);
    s.done_values = std::move(p.values);
  }
}

void RowBuffers::set_attributes(const std::map<std::string, std::string>& config) {
  std::lock_guard<std::mutex> lk(mutex_);
  for (const auto& [k, v] : config) pending_.attrs[k] = v;
}

void RowBuffers::set_attribute(const std::string& key, AttrValue value) {
  if (key.empty()) throw std::invalid_argument("metrics attribute key must not be empty");
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.attrs[key] = std::move(value);
}

void RowBuffers::set_decision(const std::string& key, std::string json) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.decisions[key] = std::move(json);
}

void RowBuffers::write_layers(const std::vector<LayerInfo>& layers) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.layers = layers;
  pending_.layers_dirty = true;
}

void RowBuffers::append_step(const StepRow& row) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.steps.push_back(row);
}

void RowBuffers::append_sync_event(const SyncEventRow& row) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.sync_events.push_back(row);
}

void RowBuffers::append_eval(const EvalRow& row) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.evals.push_back(row);
}

void RowBuffers::append_layer_ready(const LayerReadyRow& row) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.layer_ready.push_back(row);
}

void RowBuffers::append_event(EventRow row) {
  std::lock_guard<std::mutex> lk(mutex_);
  pending_.events.push_back(std::move(row));
}

void RowBuffers::declare_sensitivity(ProbeKind kind, std::vector<int32_t> delays, int32_t num_layers) {
  if (delays.empty() || num_layers <= 0)
    throw std::invalid_argument("declare_sensitivity needs at least one delay and one layer");
  for (size_t i = 0; i < delays.size(); ++i)
    if (delays[i] <= 0 || (i && delays[i] <= delays[i - 1]))
      throw std::invalid_argument("sensitivity delays must be positive and increasing");
  std::lock_guard<std::mutex> lk(mutex_);
  Sensitivity& s = sens_[static_cast<int>(kind)];
  if (s.declared) {
    if (s.delays == delays && s.num_layers == num_layers) return;
    if (!s.imported_from.empty())
      throw dd::UsageError("resumed metrics file " + s.imported_from + " holds " +
                           std::string(kind == ProbeKind::kMinibatch ? "minibatch" : "fixed-batch") +
                           " sensitivity probes with " + shape_text(s.delays, s.num_layers) +
                           ", but this run declares " + shape_text(delays, num_layers) +
                           "; resume with the same --sensitivity delays and model");
    throw std::invalid_argument("sensitivity already declared with a different [layer, delay] shape");
  }
  s.declared = true;
  s.delays = std::move(delays);
  s.num_layers = num_layers;
}

void RowBuffers::record_cosine(ProbeKind kind, int64_t probe_step, int32_t delay,
                               const std::vector<float>& per_layer) {
  std::lock_guard<std::mutex> lk(mutex_);
  Sensitivity& s = sens_[static_cast<int>(kind)];
  if (!s.declared) throw std::invalid_argument("record_cosine before declare_sensitivity");
  if (per_layer.size() != static_cast<size_t>(s.num_layers))
    throw std::invalid_argument("record_cosine: got " + std::to_string(per_layer.size()) + " layers, declared " +
                                std::to_string(s.num_layers));
  auto it = std::find(s.delays.begin(), s.delays.end(), delay);
  if (it == s.delays.end()) throw std::invalid_argument("record_cosine: undeclared delay " + std::to_string(delay));
  size_t di = static_cast<size_t>(it - s.delays.begin()), nd = s.delays.size();
  auto& p = s.in_flight[probe_step];
  if (p.values.empty()) {
    p.values.assign(per_layer.size() * nd, std::numeric_limits<float>::quiet_NaN());
    p.have.assign(nd, 0);
  }
  for (size_t l = 0; l < per_layer.size(); ++l) p.values[l * nd + di] = per_layer[l];
  if (!p.have[di]) {
    p.have[di] = 1;
    ++p.n_have;
  }
  if (p.n_have == nd) {
    s.done_steps.push_back(probe_step);
    s.done_values.insert(s.done_values.end(), p.values.begin(), p.values.end());
    s.in_flight.erase(probe_step);
  }
}

void RowBuffers::finish_open_probes() {
  std::lock_guard<std::mutex> lk(mutex_);
  for (auto& s : sens_) {
    for (auto& [step, p] : s.in_flight) {
      s.done_steps.push_back(step);
      s.done_values.insert(s.done_values.end(), p.values.begin(), p.values.end());
    }
    s.in_flight.clear();
  }
}

RowBatch RowBuffers::drain() {
  RowBatch b;
  std::lock_guard<std::mutex> lk(mutex_);
  b.attrs.swap(pending_.attrs);
  b.decisions.swap(pending_.decisions);
  b.layers_dirty = pending_.layers_dirty;
  if (b.layers_dirty) b.layers = pending_.layers;  // kept: a later write_layers replaces the whole table
  pending_.layers_dirty = false;
  b.steps.swap(pending_.steps);
  b.sync_events.swap(pending_.sync_events);
  b.evals.swap(pending_.evals);
  b.layer_ready.swap(pending_.layer_ready);
  b.events.swap(pending_.events);
  for (int k = 0; k < 2; ++k) {
    Sensitivity& s = sens_[k];
    ProbeBatch& p = b.probes[k];
    p.num_layers = s.num_layers;
    if (s.declared && !s.created) {
      p.create = true;
      p.delays = s.delays;
      s.created = true;
    }
    p.steps.swap(s.done_steps);
    p.values.swap(s.done_values);
  }
  return b;
}

}  // namespace dd::telemetry
