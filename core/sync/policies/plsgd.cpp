// plsgd:h=H: H contiguous groups of about equal bytes, group j averaged from the hook at steps = j mod H.
#include <sstream>

#include "core/sync/policy/registry.h"
#include "core/sync/schedule/schedule_model.h"
#include "core/sync/schedule/schedule_solver.h"

namespace dd::sync {
namespace {

class PlSgdPolicy : public Policy, public Reporting {
 public:
  explicit PlSgdPolicy(const PolicySpec& s)
      : h_(int(s.get_int("h", 8, 1, kMaxPhases))), merge_(parse_merge(s, "plsgd", h_)) {
    s.allow_only_with_merge_keys({"h"});
    set_merge(merge_);
    set_period(h_);
    caps_.reporting = this;
  }
  std::string describe() const override { return "plsgd:h=" + std::to_string(h_) + merge_.describe(); }
  void setup(const std::vector<LayerMeta>& layers, int world) override {
    Policy::setup(layers, world);
    std::vector<double> bytes;
    for (auto& l : layers) bytes.push_back(double(l.bytes));
    group_ = contiguous_groups(bytes, h_);
  }
  Action decide(int layer, int64_t step) const override {
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

const bool registered = register_policy("plsgd", [](const PolicySpec& s) -> std::unique_ptr<Policy> {
  return std::make_unique<PlSgdPolicy>(s);
});

}  // namespace
}  // namespace dd::sync
