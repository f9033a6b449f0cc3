// Launches (launches.h): planning this step's buckets, launching them in plan order, checking that all were.
#include "core/sync/engine/launches.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/sync/engine/step_plan.h"

namespace dd::sync {

Launches::~Launches() {
  for (const auto& f : inflight) wait_all_quietly(f.works);
  for (const auto& c : instep) wait_all_quietly(c.works);
}

void Launches::plan(const std::vector<Action>& actions, const std::vector<LayerRange>& ranges, int64_t first_bytes,
                    int64_t cap_bytes) {
  buckets = plan_buckets(actions, ranges, first_bytes, cap_bytes);
  trigger = bucket_triggers(buckets, int(actions.size()));
  inflight.clear();
  instep.clear();
  launched = 0;
}

int Launches::take(int l) {
  const int bi = trigger[size_t(l)];
  if (bi < 0) return -1;
  // Buckets launch in plan order on every rank (the consistency rule): a model that reports its layers out of
  // order would make the ranks' collectives differ.
  if (bi != launched)
    throw std::logic_error("sync: bucket " + std::to_string(bi) + " (layers " + std::to_string(buckets[bi].lo) + ".." +
                           std::to_string(buckets[bi].hi) + ") became ready before bucket " + std::to_string(launched) +
                           ": the model reported its layers out of backward order");
  ++launched;
  return bi;
}

// Every planned bucket was launched before the wait: a model that forgot a notify would otherwise skip a bucket
// silently on this rank (and leave the others waiting in a collective it never joins).
void Launches::check_all_launched(int64_t step) const {
  if (launched == int(buckets.size())) return;
  const Bucket& b = buckets[size_t(launched)];
  throw std::logic_error("sync: step " + std::to_string(step) + ": bucket " + std::to_string(launched) + " of " +
                         std::to_string(buckets.size()) + " (layers " + std::to_string(b.lo) + ".." + std::to_string(b.hi) +
                         ") was never launched: the model's backward did not report layer " + std::to_string(b.lo) +
                         " to the hook");
}

// Each all-reduce from its launch or the previous one's end, whichever is later, to its own end.
void Launches::record_comm(SelfProfile& profile) const {
  double prev = 0;
  for (auto& f : inflight) {
    double end = 0;
    for (auto& w : f.works)
      if (w) end = std::max(end, w->end_time());
    if (end <= 0) continue;  // a backend that does not record it
    const double start = std::max(f.launch_s, prev);
    prev = end;
    if (end > start) profile.add_comm(f.bytes >= 0 ? f.bytes : f.bucket.bytes(), end - start);
  }
}

}  // namespace dd::sync
