// dreamddp:h=H: every layer averaged once per H steps at the phase the schedule solver picks from a per-layer
// profile (self-measured during the first steps, lock-step meanwhile, or read from profile=DIR), plus fill-in
// syncs where the modelled channel is idle, fused into the buckets a phase launches anyway (on by default, as in the
// paper's system; fillin=0 for the bare schedule). Fill-in is free under the time model; see schedule_model.h for why
// it never opens a collective of its own.
#include <sstream>

#include "core/common/bytes.h"
#include "core/common/error.h"
#include "core/sync/policy.h"
#include "core/sync/profile_io.h"
#include "core/sync/schedule_bound.h"
#include "core/sync/schedule_model.h"
#include "core/sync/schedule_solver.h"

namespace dd::sync {
namespace {

class DreamDdpPolicy : public Policy {
 public:
  explicit DreamDdpPolicy(const PolicySpec& s)
      : h_(int(s.get_int("h", 8, 1, kMaxPhases))), merge_(parse_merge(s, "dreamddp", h_)), delay_(merge_.delay),
        fillin_(s.get_bool("fillin", default_fillin())), profile_dir_(s.get_str("profile", "")),
        profile_steps_(s.get_int("profile_steps", 6, 2, 10000)) {
    s.allow_only_with_merge_keys({"h", "fillin", "profile", "profile_steps"});
    // Fill-in adds averages of a layer between its own: with a delay two of them could be in flight at once.
    if (delay_ > 0 && fillin_)
      throw UsageError("--policy dreamddp: delay=" + std::to_string(delay_) + " and fill-in cannot be combined (two "
                       "averages of one layer would be in flight); drop fillin=1 (fill-in is off by default with a delay)");
    if (!profile_dir_.empty()) file_profile_ = read_profile(profile_dir_);
  }
  std::string describe() const override {
    return "dreamddp:h=" + std::to_string(h_) + (fillin_ == default_fillin() ? "" : fillin_ ? ",fillin=1" : ",fillin=0") +
           merge_.describe() + (profile_dir_.empty() ? "" : ",profile=" + profile_dir_);
  }
  MergeSpec merge() const override { return merge_; }

  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    if (profile_dir_.empty()) return;
    // A profile from a file must describe this model, layer by layer.
    LayerTimes t;
    for (auto& l : layers) {
      size_t i = 0;
      while (i < file_profile_.names.size() && file_profile_.names[i] != l.name) ++i;
      if (i == file_profile_.names.size())
        throw UsageError("--policy dreamddp: profile " + profile_dir_ + " has no layer '" + l.name +
                         "' of this model (write one with `dreamddp profile`)");
      t.backward_s.push_back(file_profile_.bp[i]);
      t.comm_s.push_back(file_profile_.comm[i]);
    }
    on_profile(t);
  }

  int64_t profile_steps() const override { return phase_.empty() ? profile_steps_ : 0; }

  void on_profile(const LayerTimes& t) override {
    times_ = t;
    // schedule_phases has no wall-clock cut-off: equal inputs give equal phases on every rank.
    phase_ = delay_ ? schedule_phases_delayed(t.backward_s, t.comm_s, h_, delay_)
                    : schedule_phases(t.backward_s, t.comm_s, h_);
    modelled_ = delay_ ? delayed_time(t.backward_s, t.comm_s, h_, phase_, delay_, 0, 0)
                       : modelled_time(t.backward_s, t.comm_s, h_, phase_);
    bound_ = schedule_lower_bound(t.backward_s, t.comm_s, h_);
    extra_.assign(phase_.size(), {});
    if (fillin_) extra_ = fill_in(t.backward_s, t.comm_s, h_, phase_);
  }

  std::string save_state() const override {
    ByteWriter w;
    w.put_vec(times_.backward_s);
    w.put_vec(times_.comm_s);
    return w.bytes();
  }
  void load_state(const std::string& s) override {
    ByteReader r(s);
    LayerTimes t;
    t.backward_s = r.get_vec<double>();
    t.comm_s = r.get_vec<double>();
    // The schedule is a deterministic function of the agreed profile: re-solving gives the saved phases.
    if (!t.backward_s.empty()) on_profile(t);
  }

  int64_t plan_version() const override { return phase_.empty() ? 0 : 1; }

  Action decide(int layer, int64_t step) const override {
    const int p = int(step % h_);
    if (phase_[layer] == p) return Action::AverageParams;
    for (int q : extra_[layer])
      if (q == p) return Action::AverageParams;
    return Action::None;
  }

  std::string plan() const override {
    if (phase_.empty()) return "dreamddp: profiling backward and communication during the first " +
                               std::to_string(profile_steps_) + " steps (lock-step meanwhile)";
    std::ostringstream o;
    o.precision(4);
    o << "dreamddp: schedule for H=" << h_ << (delay_ ? ", delay=" + std::to_string(delay_) : std::string()) << " (modelled " << modelled_ * 1e3 << " ms/iter backward+comm, bound "
      << bound_ * 1e3 << " ms; ddp " << ddp_time(times_.backward_s, times_.comm_s) * 1e3 << " ms)\n  phase:";
    for (size_t l = 0; l < phase_.size(); ++l) o << " " << layers_[l].name << "=" << phase_[l];
    if (fillin_) {
      o << "\n  fill-in (extra averages fused into a phase's buckets):";
      bool any = false;
      for (size_t l = 0; l < extra_.size(); ++l) {
        if (extra_[l].empty()) continue;
        o << " " << layers_[l].name << "@";
        for (size_t i = 0; i < extra_[l].size(); ++i) o << (i ? "," : "") << extra_[l][i];
        any = true;
      }
      if (!any) o << " none (no neighbour of a phase's layers fits its idle channel)";
    }
    return o.str();
  }

 private:
  // Fill-in is on for the plain in-step average; off with a delay (it cannot be combined) and with an outer
  // optimizer or compression (each extra average would be one more outer step / encoded payload; ask with fillin=1).
  bool default_fillin() const { return delay_ == 0 && !merge_.transforms(); }

  int h_;
  MergeSpec merge_;
  int delay_;
  bool fillin_;
  std::string profile_dir_;
  int64_t profile_steps_;
  LayerProfile file_profile_;
  LayerTimes times_;
  std::vector<int> phase_;
  FillIn extra_;
  double modelled_ = 0, bound_ = 0;
};

const bool registered = register_policy("dreamddp", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<DreamDdpPolicy>(s);
});

}  // namespace

}  // namespace dd::sync
