// LayerSync's averages outside the hook (layer_sync.h): Local SGD's whole-model average after the update,
// the delayed corrections merged when due, the blocking averages of a switch, a fallback or a lock-step entry, the
// final average, and the consensus model of evaluation.
#include <algorithm>
#include <string>

#include "base/clock.h"
#include "core/common/crc.h"
#include "core/sync/engine/layer_sync.h"
#include "core/sync/engine/step_plan.h"

namespace dd::sync {

// localsgd with delay= or a transform: the whole-model average after the update of this step, on copies; blocking
// and applied at once (delay=0) or merged at the start of step + delay.
void LayerSync::periodic_average() {
  std::vector<CopyAverage> sent = launch_local_copies(step_ + policy_.merge.delay);
  if (policy_.merge.delay > 0) {
    for (auto& d : sent) copies_.defer(std::move(d));
    return;
  }
  apply_copies(sent, /*log=*/true);
}

// The averages on copies of every layer that is not lock-step, in buckets, merged at `merge_step`.
std::vector<CopyAverage> LayerSync::launch_local_copies(int64_t merge_step) {
  std::vector<CopyAverage> sent;
  for (auto& bk : plan_average(plan_.local_layers(), layers_.ranges, o_.bucket_cap_bytes))
    sent.push_back(copies_.launch(b_, bk, step_, merge_step, launches_.t_bwd, -1));
  return sent;
}

// Waits for averages on copies launched for this step and makes them the layers' values.
void LayerSync::apply_copies(std::vector<CopyAverage>& sent, bool log) {
  for (auto& d : sent) {
    for (auto& w : d.works) w->wait();
    copies_.apply(d, /*in_step=*/true);
    if (!log) continue;
    InFlight f{d.bucket, {}, d.launch_s, d.bytes};
    f.works = d.works;
    log_sync_event(f, now_s(), step_, launches_.t_bwd);
  }
}

// The run ended in a last period whose layers stayed local (closing_period.h) under a transformed merge (an outer
// step, compression): their sync is that merge, of every local layer at once, as Local SGD's last period ends on
// its outer step. It leaves them equal on every rank, and the closing average then finds nothing to send. Not a
// step: not logged, and its bytes are not counted (as the closing average's).
void LayerSync::closing_merge() {
  if (!policy_.merge.transforms() || !in_closing_period(step_)) return;
  const int64_t bytes0 = coll_.stats().bytes;
  std::vector<CopyAverage> sent = launch_local_copies(step_);
  apply_copies(sent, /*log=*/false);
  coll_.stats().bytes = bytes0;
}

// Merges the delayed averages due by this step (all of them when `all`: before a switch, a fallback, a lock-step
// entry, the end), oldest first: theta += avg(theta(t)) - theta(t).
void LayerSync::merge_delayed(bool all) {
  double prev_end = 0;  // the communication thread runs them in launch order: one starts once the one before ended
  while (copies_.due(step_, all)) {
    CopyAverage d = copies_.pop();
    const double t0 = now_s();
    double end = 0;
    for (auto& w : d.works)
      if (w) w->wait(), end = std::max(end, w->end_time());
    coll_.stats().exposed_ms += (now_s() - t0) * 1e3;
    // The default start records every all-reduce of its observed steps (Launches::record_comm), the delayed ones
    // here, once they have ended (one loaded from a checkpoint has no works in this process and is not recorded).
    if (end > 0 && d.step > policy_.policy->first_step() && policy_.policy->observing(d.step)) {
      const double start = std::max(d.launch_s, prev_end);
      if (end > start) profile_.add_comm(d.bytes >= 0 ? d.bytes : d.bucket.bytes(), end - start);
    }
    if (end > 0) prev_end = end;
    copies_.apply(d, /*in_step=*/false);
    if (o_.metrics && d.t_bwd > 0) {
      InFlight f{d.bucket, {}, d.launch_s, d.bytes};
      log_sync_event(f, end > 0 ? end : now_s(), d.step, d.t_bwd);
    }
  }
}

// Blocking average of every layer that is not lock-step (their parameters differ across ranks) and of all buffers.
// Lock-step layers are already bitwise identical and are left alone: re-averaging equal values can round
// (x+x+x != 3x in float). `log`: write one /sync_events row per bucket (the blocking averages of a step: Local
// SGD's, a switch's); the consensus copies of evaluation and the final average are not steps and are not logged.
void LayerSync::average_all(bool count_stats, bool log) {
  const int64_t bytes0 = coll_.stats().bytes;
  average_layers(plan_.local_layers(), o_.average_optimizer_state, BufferAverage::All, log);
  if (!count_stats) coll_.stats().bytes = bytes0;
}

// Blocking average of the parameters of the chosen layers (and, optionally, their optimizer state); buffers of the
// chosen layers, or of all layers.
void LayerSync::average_layers(const std::vector<bool>& which, bool optimizer_state, BufferAverage buf, bool log) {
  std::vector<InFlight> sent;
  const bool all_buffers = buf == BufferAverage::All;
  for (auto& bk : plan_average(which, layers_.ranges, o_.bucket_cap_bytes)) {
    InFlight f{bk, {}, now_s()};
    for (auto& part : bucket_parts(bk, buf == BufferAverage::PerLayer, optimizer_state ? a_.state_slots : 0,
                                   a_.num_params))
      f.works.push_back(coll_.average(b_, arena_ptr(a_, part), part.n, part.what));
    sent.push_back(std::move(f));
  }
  WorkPtr buffers;
  if (all_buffers && a_.num_buffers) buffers = coll_.average(b_, a_.buffers, a_.num_buffers, "average-buffers");
  for (auto& f : sent)
    for (auto& w : f.works) w->wait();
  if (buffers) buffers->wait();
  if (log)
    for (auto& f : sent) log_sync_event(f, now_s(), step_, launches_.t_bwd);
}

// The averages outside steps (the end, evaluation's consensus) leave alone what is already equal on every rank
// (after Local SGD's last average of a period, or a final average, every layer is): the average of equal values is
// those values, and sending the whole model over the link for it would cost a transfer for nothing (and can round:
// x+x+x != 3x in float). Ranks tell by one allgather of CRC-32s, a layer's parameters (and its optimizer state
// when that is averaged with them), and the buffers'.
void LayerSync::average_differing() {
  std::vector<bool> which = plan_.local_layers();
  bool buffers = a_.num_buffers > 0;
  if (dp_->moves_data()) {  // a simulation's arenas hold no training state: it averages as it always did
    const bool state = o_.average_optimizer_state;
    std::string mine;  // 8 hex digits per local layer, then the buffers': the same fields on every rank
    auto put = [&](uint32_t c) { mine += crc_hex(c); };
    for (int l = 0; l < num_layers(); ++l) {
      if (!which[size_t(l)]) continue;
      const LayerRange& r = layers_.ranges[size_t(l)];
      uint32_t c = dp_->crc(a_.params + r.param_off, size_t(r.param_n));
      for (int s = 0; state && s < a_.state_slots; ++s)
        c = dp_->crc(a_.opt_state + s * a_.num_params + r.param_off, size_t(r.param_n), c);
      put(c);
    }
    put(dp_->crc(a_.buffers, size_t(a_.num_buffers)));
    const std::vector<std::string> all = b_.allgather(mine);
    auto same = [&](size_t i) {
      for (const auto& x : all)
        if (x.size() != all[0].size() || x.compare(8 * i, 8, all[0], 8 * i, 8) != 0) return false;
      return true;
    };
    size_t i = 0;
    for (int l = 0; l < num_layers(); ++l)
      if (which[size_t(l)] && same(i++)) which[size_t(l)] = false;
    buffers = buffers && !same(i);
  }
  const int64_t bytes0 = coll_.stats().bytes;
  average_layers(which, o_.average_optimizer_state, buffers ? BufferAverage::All : BufferAverage::None, false);
  coll_.stats().bytes = bytes0;
}

// Whether every rank holds the same parameters and buffers: their sizes and CRC-32s, in one all-gather. A
// simulation's arenas hold no training state: it broadcasts as it always did.
bool LayerSync::start_equal_everywhere() {
  if (!dp_->moves_data()) return false;
  const std::string mine = std::to_string(a_.num_params) + ":" + std::to_string(a_.num_buffers) + ":" +
                           crc_hex(dp_->crc(a_.params, size_t(a_.num_params))) + "," +
                           crc_hex(dp_->crc(a_.buffers, size_t(a_.num_buffers)));
  const std::vector<std::string> all = b_.allgather(mine);
  return std::all_of(all.begin(), all.end(), [&](const std::string& x) { return x == mine; });
}

void LayerSync::finalize() {
  apply_agreed_votes(/*all=*/true);
  merge_delayed(/*all=*/true);
  closing_merge();
  average_differing();
}

void LayerSync::with_consensus(const std::function<void()>& fn) {
  std::vector<float> p, bu;
  dp_->save(a_.params, size_t(a_.num_params), p);
  dp_->save(a_.buffers, size_t(a_.num_buffers), bu);
  average_differing();
  fn();
  dp_->restore(a_.params, size_t(a_.num_params), p);
  dp_->restore(a_.buffers, size_t(a_.num_buffers), bu);
}

}  // namespace dd::sync
