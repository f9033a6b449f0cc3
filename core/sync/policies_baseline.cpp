// The baseline policies: ddp (every layer lock-step), localsgd (whole model every K steps, blocking, after the
// update) and plsgd (H contiguous groups of about equal bytes, group j averaged from the hook at steps = j mod H).
#include <sstream>

#include "core/common/error.h"
#include "core/sync/policy.h"
#include "core/sync/schedule_solver.h"
#include "core/sync/policy_factory.h"
#include "core/sync/schedule_model.h"

namespace dd::sync {
namespace {

void allow_with_merge_keys(const PolicySpec& s, std::vector<std::string> keys) {
  keys.insert(keys.end(), merge_keys().begin(), merge_keys().end());
  s.allow_only(keys);
}

class DdpPolicy : public Policy {
 public:
  explicit DdpPolicy(const PolicySpec& s) { s.allow_only({}); }
  std::string describe() const override { return "ddp"; }
  Action decide(int, int64_t) override { return Action::AllreduceGrads; }
};

class LocalSgdPolicy : public Policy {
 public:
  explicit LocalSgdPolicy(const PolicySpec& s)
      : k_(s.get_int("k", 8, 1, 1 << 20)), merge_(parse_merge(s, "localsgd", k_)) {
    allow_with_merge_keys(s, {"k"});
  }
  std::string describe() const override { return "localsgd:k=" + std::to_string(k_) + merge_.describe(); }
  // With delay=T the whole-model average after step t is launched without waiting and merged at step t + T.
  MergeSpec merge() const override { return merge_; }
  Action decide(int, int64_t) override { return Action::None; }
  bool full_average_after(int64_t step) const override { return (step + 1) % k_ == 0; }

 private:
  int64_t k_;
  MergeSpec merge_;
};

class PlSgdPolicy : public Policy {
 public:
  explicit PlSgdPolicy(const PolicySpec& s)
      : h_(int(s.get_int("h", 8, 1, kMaxPhases))), merge_(parse_merge(s, "plsgd", h_)) {
    allow_with_merge_keys(s, {"h"});
  }
  std::string describe() const override { return "plsgd:h=" + std::to_string(h_) + merge_.describe(); }
  MergeSpec merge() const override { return merge_; }
  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    std::vector<double> bytes;
    for (auto& l : layers) bytes.push_back(double(l.bytes));
    group_ = contiguous_groups(bytes, h_);
  }
  Action decide(int layer, int64_t step) override {
    return step % h_ == group_[layer] ? Action::AverageParams : Action::None;
  }
  std::string plan() const override {
    std::ostringstream o;
    o << "plsgd: " << h_ << " contiguous groups of ~equal bytes:";
    for (size_t i = 0; i < group_.size(); ++i) o << (i ? " " : " ") << group_[i];
    return o.str();
  }

 private:
  int h_;
  MergeSpec merge_;
  std::vector<int> group_;
};

}  // namespace

std::unique_ptr<Policy> make_baseline_policy(const PolicySpec& s) {
  if (s.name == "ddp") return std::make_unique<DdpPolicy>(s);
  if (s.name == "localsgd") return std::make_unique<LocalSgdPolicy>(s);
  if (s.name == "plsgd") return std::make_unique<PlSgdPolicy>(s);
  return nullptr;
}

}  // namespace dd::sync
