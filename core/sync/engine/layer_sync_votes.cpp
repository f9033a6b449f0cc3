// LayerSync's control all-reduce (layer_sync.h, docs/design.md consistency rule): after the update every rank
// casts its policy's votes, rank 0's control-file flag, its anomaly flag and compress=auto's cosines; the sums are
// applied by every rank at the same later step, so all decide from the same numbers.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/sync/engine/layer_sync.h"
#include "core/telemetry/metrics_writer.h"

namespace dd::sync {

void LayerSync::cast_votes() {
  if (votes_.votes.size() == 0) return;
  const LayerSignals& s = votes_.signals.signals();
  if (votes_.policy_votes) policy_.caps.voting->cast_votes(step_, s, votes_.votes.data());
  size_t k = votes_.policy_votes;
  if (votes_.file.on()) votes_.votes[k++] = b_.rank() == 0 && votes_.file.poll(step_) ? 1.0f : 0.0f;
  if (o_.anomaly_votes) votes_.votes[k++] = votes_.local_anomaly ? 1.0f : 0.0f;
  votes_.local_anomaly = false;
  for (size_t l = 0; l < auto_.votes(); ++l) votes_.votes[k++] = float(s.cos_prev[l]);
  coll_.fingerprint("control", int64_t(votes_.votes.size()));
  Backend& channel = votes_.channel ? *votes_.channel : b_;
  votes_.queue.cast(step_, policy_.generation, votes_.layout, votes_.votes.data(), *dp_, channel);
}

// Applies, oldest first, every control vector cast at least the lag's steps ago (all of them when `all`).
void LayerSync::apply_agreed_votes(bool all) {
  double waited = 0;
  auto due = votes_.queue.due(step_, votes_.lag, all, &waited);
  coll_.stats().exposed_ms += waited * 1e3;
  for (auto& c : due) apply_votes(c);
}

void LayerSync::apply_votes(const ControlVector& c) {
  const float* v = c.sums->data();
  const bool same_policy = c.generation == policy_.generation;
  size_t k = c.layout.policy_votes;
  const bool switch_requested = c.layout.switch_flag && v[k++] > 0.5f;
  const int seen = c.layout.anomaly_flag ? int(v[k++] + 0.5f) : 0;
  if (same_policy && c.layout.auto_votes && auto_.add(c.step, v + k, b_.size())) {
    const std::string what = auto_.describe(layers_.meta);
    if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "sync: %s\n", what.c_str());
    if (o_.metrics) {
      o_.metrics->append_event(step_, "compress", what);
      auto j = nlohmann::json::parse(auto_.decisions(layers_.meta));
      j["decided_at"] = step_;
      j["policy"] = policy_.spec;
      o_.metrics->set_decision("compress@" + std::to_string(policy_.policy->first_step()), j.dump());
    }
  }
  if (seen > 0 && votes_.agreed_anomalies == 0) votes_.agreed_anomaly_step = c.step;
  votes_.agreed_anomalies += seen;
  if (votes_.policy_votes && same_policy) policy_.caps.voting->on_agreed(c.step, v, b_.size());
  print_plan_if_changed();
  if (switch_requested) {
    // Rank 0 read a new spec; everyone learns it (one small blocking allgather) and switches at this step.
    const std::string spec = b_.allgather(b_.rank() == 0 ? votes_.file.pending() : std::string())[0];
    switch_policy(PolicySpec::parse(spec), " (control file)");  // parsed as read: once here
  }
}

}  // namespace dd::sync
