// InPlaceUndo (in_place_undo.h): kept ranges of the training state under in-place collectives.
#include "core/sync/engine/in_place_undo.h"

#include <algorithm>

namespace dd::sync {

namespace {

// Forgets its range once the collective's wait() returns (a wait that throws leaves it kept, for undo()).
class UndoWork final : public Work {
 public:
  UndoWork(WorkPtr inner, std::function<void()> done) : inner_(std::move(inner)), done_(std::move(done)) {}
  void wait() override {
    inner_->wait();
    if (done_) done_();
    done_ = nullptr;
  }
  bool test() override { return inner_->test(); }
  double end_time() const override { return inner_->end_time(); }

 private:
  WorkPtr inner_;
  std::function<void()> done_;
};

bool overlaps(const float* a, size_t an, const float* b, size_t bn) { return a < b + bn && b < a + an; }

}  // namespace

void InPlaceUndo::protect(const float* p, size_t n, ops::Device& d) {
  std::lock_guard<std::mutex> l(mu_);
  if (p && n) arenas_.push_back({p, n, &d});
}

ops::Device* InPlaceUndo::device_of(const float* p, size_t n) const {
  for (const auto& a : arenas_)
    if (p >= a.p && p + n <= a.p + a.n) return a.dev;
  return nullptr;
}

bool InPlaceUndo::covers(const float* p, size_t n) const {
  std::lock_guard<std::mutex> l(mu_);
  return device_of(p, n) != nullptr;
}

WorkPtr InPlaceUndo::launch(float* p, size_t n, const std::function<WorkPtr()>& start) {
  if (n == 0) return start();
  uint64_t id = 0;
  {
    std::unique_lock<std::mutex> l(mu_);
    ops::Device* dev = device_of(p, n);  // the arena's device; null: not the training state, nothing kept
    if (!dev) {
      l.unlock();
      return start();
    }
    // The engine never launches two collectives on the same floats at once: a kept range this one overlaps has
    // completed (its Work was dropped after a successful test(), or never waited), so it is forgotten.
    Record* slot = nullptr;
    for (auto& r : recs_)
      if (r.live && overlaps(r.p, r.n, p, n)) r.live = false;
    for (auto& r : recs_)
      if (!r.live && r.p == p && r.n == n) slot = &r;
    if (!slot) {
      recs_.emplace_back();
      slot = &recs_.back();
    }
    ops::Device& d = *dev;
    if (slot->dev != &d) slot->old = ops::DeviceFloats(d);
    slot->dev = &d;
    slot->p = p;
    slot->n = n;
    slot->old.ensure(n);
    d.copy(slot->old.data(), p, n * sizeof(float));
    d.synchronize();  // the collective launched next may write p: the copy has read it
    slot->id = id = next_id_++;
    slot->live = true;
    kept_ += int64_t(n);
  }
  std::weak_ptr<InPlaceUndo> self = weak_from_this();
  return std::make_shared<UndoWork>(start(), [self, id] {
    if (auto s = self.lock()) s->forget(id);
  });
}

void InPlaceUndo::forget(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& r : recs_)
    if (r.live && r.id == id) r.live = false;
}

size_t InPlaceUndo::undo() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Record*> live;
  for (auto& r : recs_)
    if (r.live) live.push_back(&r);
  std::sort(live.begin(), live.end(), [](const Record* a, const Record* b) { return a->id > b->id; });
  size_t n = 0;
  for (Record* r : live) {
    r->dev->copy(r->p, r->old.data(), r->n * sizeof(float));
    r->dev->synchronize();
    r->live = false;
    n += r->n;
  }
  return n;
}

size_t InPlaceUndo::in_flight() const {
  std::lock_guard<std::mutex> l(mu_);
  return size_t(std::count_if(recs_.begin(), recs_.end(), [](const Record& r) { return r.live; }));
}

int64_t InPlaceUndo::kept_floats() const {
  std::lock_guard<std::mutex> l(mu_);
  return kept_;
}

}  // namespace dd::sync
