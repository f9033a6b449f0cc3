// hier: two-level, topology-aware synchronization. Ranks form groups (nodes=AxB: A groups of B consecutive
// ranks, or nodes=auto: one group per host name). During the first steps (lock-step meanwhile) every rank votes
// its layers' gradient-direction stability (EMA of cos between successive local gradients); the agreed mean
// ranks layers by sensitivity, and a greedy pass gives the most sensitive layers, up to `fast` of the bytes, the
// fast tier: averaged inside the group every `intra` steps and across all ranks every `inter` steps. The other
// layers ride the slow links only: averaged across all ranks every `slow` steps.
// Defaults (fast 25% of the bytes, intra 2, inter 32, slow 16) cross the slow links with 1.5*(0.25/32 + 0.75/16)
// = 0.082 of the model per rank and step, less than half of dreamddp:h=8's 1.5/8 = 0.19 (ring all-reduce, 4 ranks).
#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/policy/registry.h"

namespace dd::sync {
namespace {

class HierPolicy : public Policy, public Grouped, public Voting, public Reporting, public Checkpointed {
 public:
  explicit HierPolicy(const PolicySpec& s)
      : nodes_(s.get_str("nodes", "auto")), intra_(s.get_int("intra", 2, 1, 1 << 20)),
        inter_(s.get_int("inter", 32, 1, 1 << 20)), slow_(s.get_int("slow", 16, 1, 1 << 20)),
        fast_(s.get_double("fast", 0.25, 0.0, 1.0)), profile_steps_(s.get_int("profile_steps", 10, 2, 100000)) {
    s.allow_only({"nodes", "intra", "inter", "slow", "fast", "profile_steps"});
    caps_.grouped = this;
    caps_.voting = this;
    caps_.reporting = this;
    caps_.checkpointed = this;
    if (nodes_ != "auto") {
      auto x = nodes_.find('x');
      char* e1 = nullptr;
      char* e2 = nullptr;
      // The parts outlive e1/e2, which point into them.
      const std::string a = x == std::string::npos ? "" : nodes_.substr(0, x);
      const std::string b = x == std::string::npos ? "" : nodes_.substr(x + 1);
      if (x != std::string::npos) {
        a_ = std::strtol(a.c_str(), &e1, 10);
        b_ = std::strtol(b.c_str(), &e2, 10);
      }
      if (x == std::string::npos || *e1 || *e2 || a_ < 1 || b_ < 1)
        throw UsageError("--policy hier: nodes=" + nodes_ + " (expected AxB, e.g. 2x2, or auto)");
    }
  }
  std::string describe() const override {
    return "hier:nodes=" + nodes_ + ",intra=" + std::to_string(intra_) + ",inter=" + std::to_string(inter_) +
           ",slow=" + std::to_string(slow_);
  }

  std::vector<int> groups(const std::vector<std::string>& hosts) const override {
    const int world = int(hosts.size());
    std::vector<int> g(world);
    if (nodes_ == "auto") {
      std::map<std::string, int> ids;
      for (int r = 0; r < world; ++r) g[r] = ids.emplace(hosts[r], int(ids.size())).first->second;
    } else {
      if (a_ * b_ != world)
        throw UsageError("--policy hier: nodes=" + nodes_ + " describes " + std::to_string(a_ * b_) + " ranks, the job has " + std::to_string(world));
      for (int r = 0; r < world; ++r) g[r] = int(r / b_);
    }
    return g;
  }

  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    ema_.assign(layers.size(), 1.0);
    fast_tier_.assign(layers.size(), false);
    offset_.assign(layers.size(), 0);
  }

  int votes_per_layer() const override { return 1; }
  void cast_votes(int64_t, const LayerSignals& s, float* v) override {
    for (size_t l = 0; l < s.cos_prev.size(); ++l) v[l] = float(s.cos_prev[l]);
  }
  void on_agreed(int64_t step, const float* sums, int world) override {
    // Counted from the policy's first step; that step's cos_prev compares with no gradient of this policy's.
    const int64_t rel = step - first_step_;
    if (rel < 1 || rel >= profile_steps_) return;
    for (size_t l = 0; l < ema_.size(); ++l) ema_[l] = 0.7 * ema_[l] + 0.3 * double(sums[l]) / world;
    if (rel == profile_steps_ - 1) assign();
  }

  Action decide(int l, int64_t step) const override {
    const int64_t rel = step - first_step_;
    if (rel < profile_steps_) return Action::AllreduceGrads;
    const int64_t s = rel - profile_steps_;
    if (fast_tier_[l]) {
      if ((s + offset_[l]) % inter_ == 0) return Action::AverageParams;
      return s % intra_ == 0 ? Action::AverageGroup : Action::None;
    }
    return (s + offset_[l]) % slow_ == 0 ? Action::AverageParams : Action::None;
  }

  std::string plan() const override {
    if (!assigned_) return "hier: measuring layer sensitivity during the first " + std::to_string(profile_steps_) +
                           " steps (lock-step meanwhile)";
    std::ostringstream o;
    o.precision(3);
    o << "hier: fast tier (group every " << intra_ << ", all every " << inter_ << " steps) / slow tier (all every "
      << slow_ << " steps), by measured sensitivity (agreed EMA of cos between successive gradients):";
    for (size_t l = 0; l < layers_.size(); ++l)
      o << "\n  " << layers_[l].name << "  cos " << ema_[l] << "  " << (fast_tier_[l] ? "fast" : "slow");
    return o.str();
  }

 private:
  // Greedy: most sensitive (lowest stability) first into the fast tier while it fits the byte budget.
  void assign() {
    std::vector<size_t> order(layers_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ema_[a] < ema_[b]; });
    double total = 0, used = 0;
    for (auto& l : layers_) total += double(l.bytes);
    for (size_t l : order) {
      if (used + double(layers_[l].bytes) > fast_ * total && used > 0) continue;
      if (fast_ == 0) break;
      fast_tier_[l] = true;
      used += double(layers_[l].bytes);
    }
    // Stagger the cross-group averages of each tier over the period by cumulative bytes (like plsgd).
    double acc[2] = {0, 0}, tier_bytes[2] = {0, 0};
    for (size_t l = 0; l < layers_.size(); ++l) tier_bytes[fast_tier_[l]] += double(layers_[l].bytes);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const int t = fast_tier_[l];
      const int64_t period = t ? inter_ : slow_;
      offset_[l] = tier_bytes[t] > 0 ? int64_t(acc[t] / tier_bytes[t] * double(period)) % period : 0;
      acc[t] += double(layers_[l].bytes);
    }
    assigned_ = true;
  }

 public:
  int64_t plan_version() const override { return assigned_ ? 1 : 0; }
  std::string save_state() const override {
    ByteWriter w;
    w.put_vec(ema_);
    w.put_bools(fast_tier_);
    w.put_vec(offset_);
    w.put<uint8_t>(assigned_);
    return w.bytes();
  }
  void load_state(const std::string& s) override {
    ByteReader r(s);
    ema_ = r.get_vec<double>();
    fast_tier_ = r.get_bools();
    offset_ = r.get_vec<int64_t>();
    assigned_ = r.get<uint8_t>() != 0;
  }

 private:

  std::string nodes_;
  long a_ = 0, b_ = 0;
  int64_t intra_, inter_, slow_;
  double fast_;
  int64_t profile_steps_;
  std::vector<double> ema_;
  std::vector<bool> fast_tier_;
  std::vector<int64_t> offset_;
  bool assigned_ = false;
};

const bool registered = register_policy("hier", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<HierPolicy>(s);
});

}  // namespace

}  // namespace dd::sync
