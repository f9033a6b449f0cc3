// LayerSync's checkpoint (layer_sync.h): the engine's and its policy's state after a completed step, so a
// resumed run launches the same collectives and computes the same values as the uninterrupted one.
#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/engine/layer_sync.h"

namespace dd::sync {

std::string LayerSync::save_state() {
  ByteWriter w;
  w.put_str(policy_.spec);
  w.put<uint64_t>(policy_.next_switch);
  w.put<int64_t>(step_);
  w.put_vec(plan_.stale);
  // The votes still to be applied (in flight or agreed): their sums, to apply at the same steps after a resume.
  votes_.queue.save(w);
  // Delayed averages in flight: their all-reduces are finished now; theta(t) and avg(theta(t)) are kept, to be
  // merged at the same step after a resume.
  copies_.save(w);
  votes_.signals.save(w);
  profile_.save(w);
  w.put<int64_t>(policy_.plan_version);
  w.put<int64_t>(plan_.fallback_until);
  w.put_bools(plan_.lockstep);
  w.put_str(policy_.caps.checkpointed ? policy_.caps.checkpointed->save_state() : std::string());
  pm_.save(w);
  auto_.save(w);
  w.put<int64_t>(policy_.policy->first_step());
  votes_.file.save(w);
  // The switches so far (summary.json lists them after a resume too).
  w.put<uint32_t>(uint32_t(policy_.changes.size()));
  for (auto& c : policy_.changes) {
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
  if (spec != policy_.spec) set_policy(PolicySpec::parse(spec));  // after a switch (collective for hier's sub-groups)
  policy_.next_switch = r.get<uint64_t>();
  step_ = r.get<int64_t>();
  auto stale = r.get_vec<int64_t>();
  if (stale.size() != plan_.stale.size()) throw UsageError("checkpoint: engine state is for another model");
  plan_.stale = stale;
  votes_.queue.load(r, policy_.generation, votes_.layout);
  copies_.load(r, num_layers());
  votes_.signals.load(r);
  profile_.load(r);
  policy_.plan_version = r.get<int64_t>();
  plan_.fallback_until = r.get<int64_t>();
  auto lockstep = r.get_bools();
  if (lockstep.size() != plan_.lockstep.size()) throw UsageError("checkpoint: engine state is for another model");
  plan_.lockstep = lockstep;
  const std::string policy_state = r.get_str();
  if (policy_.caps.checkpointed) policy_.caps.checkpointed->load_state(policy_state);
  pm_.load(r);
  auto_.load(r);
  // The step the policy came into force (absent in checkpoints written before it was kept: 0, as they assumed).
  policy_.policy->start_at(r.done() ? 0 : r.get<int64_t>());
  // What the control file last held (absent before it was kept: the file is read afresh, as those runs did).
  if (!r.done()) votes_.file.load(r);
  // The switches before the checkpoint (absent before they were kept: none listed).
  policy_.changes.clear();
  if (!r.done()) {
    const uint32_t n = r.get<uint32_t>();
    if (n > (1u << 20)) throw UsageError("checkpoint: engine state lists too many policy switches");
    for (uint32_t i = 0; i < n; ++i) {
      PolicyChange c;
      c.step = r.get<int64_t>();
      c.spec = r.get_str();
      c.source = r.get_str();
      policy_.changes.push_back(std::move(c));
    }
  }
  // The all-reduces recorded for a profile so far (absent before they were: none).
  if (!r.done()) profile_.load_comm(r);
  policy_.plan_version = policy_.reported_version();
  record_decisions();  // as restored (a resumed metrics.h5 keeps only what was decided by the checkpoint)
  if (!r.done()) throw UsageError("checkpoint: engine state has trailing bytes");
}

}  // namespace dd::sync
