// LayerSync's checkpoint (layer_sync.h): the engine's and its policy's state after a completed step, so a
// resumed run launches the same collectives and computes the same values as the uninterrupted one.
#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/engine/layer_sync.h"

namespace dd::sync {

std::string LayerSync::save_state() {
  ByteWriter w;
  w.put_str(policy_spec_);
  w.put<uint64_t>(next_switch_);
  w.put<int64_t>(step_);
  w.put_vec(stale_);
  // The votes still to be applied (in flight or agreed): their sums, to apply at the same steps after a resume.
  controls_.save(w);
  // Delayed averages in flight: their all-reduces are finished now; theta(t) and avg(theta(t)) are kept, to be
  // merged at the same step after a resume.
  copies_.save(w);
  signals_.save(w);
  profile_.save(w);
  w.put<int64_t>(plan_version_);
  w.put<int64_t>(fallback_until_);
  w.put_bools(lockstep_);
  w.put_str(caps_.checkpointed ? caps_.checkpointed->save_state() : std::string());
  pm_.save(w);
  auto_.save(w);
  w.put<int64_t>(policy_->first_step());
  control_file_.save(w);
  w.put<uint32_t>(uint32_t(changes_.size()));  // the switches so far (summary.json lists them after a resume too)
  for (auto& c : changes_) {
    w.put<int64_t>(c.step);
    w.put_str(c.spec);
    w.put_str(c.source);
  }
  profile_.save_comm(w);
  return w.bytes();
}

void LayerSync::load_state(const std::string& blob) {
  ByteReader r(blob);
  const std::string spec = r.get_str();
  if (spec != policy_spec_) set_policy(PolicySpec::parse(spec));  // after a switch (collective for hier's sub-groups)
  next_switch_ = r.get<uint64_t>();
  step_ = r.get<int64_t>();
  auto stale = r.get_vec<int64_t>();
  if (stale.size() != stale_.size()) throw UsageError("checkpoint: engine state is for another model");
  stale_ = stale;
  controls_.load(r, generation_, layout_);
  copies_.load(r, num_layers());
  signals_.load(r);
  profile_.load(r);
  plan_version_ = r.get<int64_t>();
  fallback_until_ = r.get<int64_t>();
  auto lockstep = r.get_bools();
  if (lockstep.size() != lockstep_.size()) throw UsageError("checkpoint: engine state is for another model");
  lockstep_ = lockstep;
  const std::string policy_state = r.get_str();
  if (caps_.checkpointed) caps_.checkpointed->load_state(policy_state);
  pm_.load(r);
  auto_.load(r);
  // The step the policy came into force (absent in checkpoints written before it was kept: 0, as they assumed).
  policy_->start_at(r.done() ? 0 : r.get<int64_t>());
  // What the control file last held (absent before it was kept: the file is read afresh, as those runs did).
  if (!r.done()) control_file_.load(r);
  // The switches before the checkpoint (absent before they were kept: none listed).
  changes_.clear();
  if (!r.done()) {
    const uint32_t n = r.get<uint32_t>();
    if (n > (1u << 20)) throw UsageError("checkpoint: engine state lists too many policy switches");
    for (uint32_t i = 0; i < n; ++i) {
      PolicyChange c;
      c.step = r.get<int64_t>();
      c.spec = r.get_str();
      c.source = r.get_str();
      changes_.push_back(std::move(c));
    }
  }
  // The all-reduces recorded for a profile so far (absent before they were: none).
  if (!r.done()) profile_.load_comm(r);
  plan_version_ = policy_plan_version();
  record_decisions();  // as restored (a resumed metrics.h5 keeps only what was decided by the checkpoint)
  if (!r.done()) throw UsageError("checkpoint: engine state has trailing bytes");
}

}  // namespace dd::sync
