// LayerSync's control all-reduce (layer_sync.h, docs/design.md consistency rule): after the update every rank
// casts its policy's votes, rank 0's control-file flag, its anomaly flag and compress=auto's cosines; the sums are
// applied by every rank at the same later step, so all decide from the same numbers.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/sync/engine/layer_sync.h"
#include "core/telemetry/metrics_writer.h"

namespace dd::sync {

void LayerSync::cast_votes() {
  if (votes_.size() == 0) return;
  const LayerSignals& s = signals_.signals();
  if (policy_votes_) caps_.voting->cast_votes(step_, s, votes_.data());
  size_t k = policy_votes_;
  if (control_file_.on()) votes_[k++] = b_.rank() == 0 && control_file_.poll(step_) ? 1.0f : 0.0f;
  if (o_.anomaly_votes) votes_[k++] = local_anomaly_ ? 1.0f : 0.0f;
  local_anomaly_ = false;
  for (size_t l = 0; l < auto_.votes(); ++l) votes_[k++] = float(s.cos_prev[l]);
  coll_.fingerprint("control", int64_t(votes_.size()));
  controls_.cast(step_, generation_, layout_, votes_.data(), *dp_, control_ ? *control_ : b_);
}

// Applies, oldest first, every control vector cast at least vote_lag_ steps ago (all of them when `all`).
void LayerSync::apply_agreed_votes(bool all) {
  double waited = 0;
  auto due = controls_.due(step_, vote_lag_, all, &waited);
  coll_.stats().exposed_ms += waited * 1e3;
  for (auto& c : due) apply_votes(c);
}

void LayerSync::apply_votes(const ControlVector& c) {
  const float* v = c.sums->data();
  const bool same_policy = c.generation == generation_;
  size_t k = c.layout.policy_votes;
  const bool switch_requested = c.layout.switch_flag && v[k++] > 0.5f;
  const int seen = c.layout.anomaly_flag ? int(v[k++] + 0.5f) : 0;
  if (same_policy && c.layout.auto_votes && auto_.add(c.step, v + k, b_.size())) {
    const std::string what = auto_.describe(meta_);
    if (o_.verbose && b_.rank() == 0) std::fprintf(stderr, "sync: %s\n", what.c_str());
    if (o_.metrics) {
      o_.metrics->append_event(step_, "compress", what);
      auto j = nlohmann::json::parse(auto_.decisions(meta_));
      j["decided_at"] = step_;
      j["policy"] = policy_spec_;
      o_.metrics->set_decision("compress@" + std::to_string(policy_->first_step()), j.dump());
    }
  }
  if (seen > 0 && agreed_anomalies_ == 0) agreed_anomaly_step_ = c.step;
  agreed_anomalies_ += seen;
  if (policy_votes_ && same_policy) caps_.voting->on_agreed(c.step, v, b_.size());
  print_plan_if_changed();
  if (switch_requested) {
    // Rank 0 read a new spec; everyone learns it (one small blocking allgather) and switches at this step.
    const std::string spec = b_.allgather(b_.rank() == 0 ? control_file_.pending() : std::string())[0];
    switch_policy(PolicySpec::parse(spec), " (control file)");  // parsed as read: once here
  }
}

}  // namespace dd::sync
