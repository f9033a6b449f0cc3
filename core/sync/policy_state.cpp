// Checkpoint state of the adaptive policies: every member decide() depends on, so a resumed run decides
// exactly as the uninterrupted one (threshold EMAs and sync history, the staleness cap's counters).
#include "core/common/bytes.h"
#include "core/sync/policies_adaptive.h"

namespace dd::sync {
namespace {

void put_actions(ByteWriter& w, const std::vector<Action>& a) {
  std::vector<int8_t> v;
  for (auto x : a) v.push_back(int8_t(x));
  w.put_vec(v);
}

std::vector<Action> get_actions(ByteReader& r) {
  std::vector<Action> a;
  for (auto x : r.get_vec<int8_t>()) a.push_back(Action(x));
  return a;
}

}  // namespace

std::string ThresholdPolicy::save_state() const {
  ByteWriter w;
  w.put_vec(local_ema_);
  w.put<int64_t>(casts_);
  for (auto* v : {&cos_, &disruption_, &change_mean_, &change_var_}) w.put_vec(*v);
  for (auto* v : {&last_sync_, &decided_step_, &real_last_, &real_prev_}) w.put_vec(*v);
  put_actions(w, decided_);
  w.put<int64_t>(agreed_);
  return w.bytes();
}

void ThresholdPolicy::load_state(const std::string& s) {
  ByteReader r(s);
  local_ema_ = r.get_vec<double>();
  casts_ = r.get<int64_t>();
  for (auto* v : {&cos_, &disruption_, &change_mean_, &change_var_}) *v = r.get_vec<double>();
  for (auto* v : {&last_sync_, &decided_step_, &real_last_, &real_prev_}) *v = r.get_vec<int64_t>();
  decided_ = get_actions(r);
  agreed_ = r.get<int64_t>();
}

std::string StalenessCap::save_state() const {
  ByteWriter w;
  w.put_vec(last_sync_);
  w.put_vec(decided_step_);
  put_actions(w, decided_);
  w.put<int64_t>(prev_step_);
  w.put_str(inner_ ? inner_->save_state() : std::string());
  return w.bytes();
}

void StalenessCap::load_state(const std::string& s) {
  ByteReader r(s);
  last_sync_ = r.get_vec<int64_t>();
  decided_step_ = r.get_vec<int64_t>();
  decided_ = get_actions(r);
  prev_step_ = r.get<int64_t>();
  const std::string inner = r.get_str();
  if (inner_) inner_->load_state(inner);
}

}  // namespace dd::sync
