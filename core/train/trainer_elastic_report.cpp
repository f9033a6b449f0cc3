// The /events lines and progress messages of a world that shrinks and grows again (docs/elastic.md): who was lost
// or joined, the new numbering, the times of each part and what was redone or moved.
#include <cstdio>

#include "base/clock.h"
#include "core/telemetry/metrics_writer.h"
#include "core/train/trainer_impl.h"

namespace dd::train {

// The shrink's /events line and progress message: who was lost, the new numbering, the times t (detect, agree,
// rebuild, recover) with the rebuild's parts, and what was redone.
void Trainer::Impl::report_shrink(const Membership& old, const Membership& next, const double* t,
                                  const RebuildTimes& r, size_t undone, int64_t position, RunRecorder& rec,
                                  Progress& progress) {
  const int new_world = int(next.members.size());
  std::vector<int> lost;
  for (int id : old.members)
    if (std::find(next.members.begin(), next.members.end(), id) == next.members.end()) lost.push_back(id);
  std::string gone = join_ranks(lost);
  if (!shrink->dropped_joiners.empty())
    gone += (lost.empty() ? "" : " and ") + std::string("joining rank ") + join_ranks(shrink->dropped_joiners);
  shrink->dropped_joiners.clear();
  char times[160], parts[160];
  std::snprintf(times, sizeof(times), "detect %.2f s, agree %.2f s, rebuild %.2f s, recover %.2f s", t[0], t[1], t[2],
                t[3]);
  std::snprintf(parts, sizeof(parts), " (rebuild: connect %.2f s, average %.2f s, optimizer state of %d lock-step "
                "layers from rank 0 %.2f s, engine %.2f s)", r.connect, r.average, r.state_layers, r.state, r.engine);
  const std::string what =
      std::to_string(old.members.size()) + " -> " + std::to_string(new_world) + " ranks (generation " +
      std::to_string(next.generation) + ": lost " + (gone.empty() ? std::string("rank none") : (lost.empty() ? "" : "rank ") + gone) +
      "; ranks " + join_ranks(next.members) + " now 0.." + std::to_string(new_world - 1) + "): " + times +
      "; step " + std::to_string(next.step) + " redone (what the failed step finished kept, " +
      std::to_string(undone) + " floats of unfinished averages put back), parameters averaged over the " +
      std::to_string(new_world) + " survivors" + parts + "; data continues at sample position " +
      std::to_string(position) +
      ", global batch " + std::to_string(int64_t(old.members.size()) * cfg.batch) + " -> " +
      std::to_string(int64_t(new_world) * cfg.batch);
  if (auto* w = rec.metrics()) {
    w->append_event(next.step, "shrink", what);
    w->flush();
  }
  if (rank0()) progress.message("shrink: " + what);
}

// The rejoin's /events line and progress message: who joined, the new numbering, the admission's time and bytes,
// and the time since the loss when the world is full again.
void Trainer::Impl::report_rejoin(const Membership& old, const Membership& next, const std::vector<int>& joiners,
                                  double t0, int64_t position, RunRecorder& rec, Progress& progress) {
  const int64_t step = next.step;
  Shrink& S = *shrink;
  const int new_world = int(next.members.size());
  const double t_full = now_s();
  char times[256];
  std::snprintf(times, sizeof(times), "admitted in %.2f s, of which %.3f s the state's transfer (%lld bytes in %lld "
                "messages of at most %lld bytes)", t_full - t0, heal.seconds, (long long)heal.bytes,
                (long long)heal.messages, (long long)heal.chunk_bytes);
  std::string full;
  if (new_world == S.start_world && S.fault_t >= 0) {
    char f[160];
    std::snprintf(f, sizeof(f), "; full world again %.2f s after the loss (from the start of step %lld, in which it "
                  "was detected)", t_full - S.fault_t, (long long)S.fault_step);
    full = f;
    S.fault_t = -1;
    S.fault_step = -1;
  }
  const std::string what =
      std::to_string(old.members.size()) + " -> " + std::to_string(new_world) + " ranks (generation " +
      std::to_string(next.generation) + ": rank " + join_ranks(joiners) + " joined; ranks " + join_ranks(next.members) +
      " now 0.." + std::to_string(new_world - 1) + "): " + times + "; parameters averaged over the " +
      std::to_string(old.members.size()) + " members, then parameters and optimizer state layer by layer and buffers sent from rank 0 "
      "(hashes equal on every rank)" + full + "; data continues at sample position " + std::to_string(position) +
      ", global batch " + std::to_string(int64_t(old.members.size()) * cfg.batch) + " -> " +
      std::to_string(int64_t(new_world) * cfg.batch);
  if (auto* w = rec.metrics()) {
    w->append_event(step, "rejoin", what);
    w->flush();
  }
  if (rank0()) progress.message("rejoin: " + what);
}

}  // namespace dd::train
