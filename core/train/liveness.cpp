#include "core/train/liveness.h"

#include <chrono>
#include <stdexcept>

#include "base/clock.h"

namespace dd::train {

Liveness::Liveness(KeyStore& store, std::string prefix, int me, std::string nonce, double silent_s, OnSilent on_silent)
    : store_(store),
      prefix_(std::move(prefix)),
      nonce_(std::move(nonce)),
      me_(me),
      silent_s_(silent_s),
      on_silent_(std::move(on_silent)) {
  if (!(silent_s > 0)) throw std::invalid_argument("Liveness: silent_s must be positive");
  beat();  // visible before the first watch of any peer
  thread_ = std::thread([this] { loop(); });
}

Liveness::~Liveness() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Liveness::watch(const std::vector<int>& members) {
  std::lock_guard<std::mutex> lk(mu_);
  ++generation_;
  members_ = members;
  seen_.clear();
}

void Liveness::unwatch() {
  std::lock_guard<std::mutex> lk(mu_);  // a verdict in progress holds it: it has finished when this returns
  ++generation_;
  members_.clear();
  seen_.clear();
}

void Liveness::beat() {
  try {
    store_.set(prefix_ + "/beat/" + std::to_string(me_), nonce_ + " " + std::to_string(++count_));
  } catch (...) {
    // the store unreachable: the others judge this rank by it, and this rank's collectives say the rest
  }
}

std::optional<std::vector<std::string>> Liveness::read(const std::vector<int>& members) {
  std::vector<std::string> values(members.size());
  for (size_t rank = 0; rank < members.size(); ++rank) {
    if (members[rank] == me_) continue;
    try {
      store_.get(prefix_ + "/beat/" + std::to_string(members[rank]), &values[rank]);  // absent: ""
    } catch (...) {
      return std::nullopt;  // the store is unreachable from here: no verdict on anyone
    }
  }
  return values;
}

void Liveness::judge(const std::vector<std::string>& values) {
  const double now = now_s();
  // This rank's own watch was interrupted (the process stopped or starved for a while): the others' counters may
  // have stood still only in its eyes. Their stillness counts again from now.
  const bool interrupted = last_judge_t_ > 0 && now - last_judge_t_ > silent_s_ / 2;
  last_judge_t_ = now;
  if (interrupted)
    for (auto& [id, s] : seen_) s.since = now;
  for (size_t rank = 0; rank < members_.size(); ++rank) {
    const int id = members_[rank];
    const std::string& v = values[rank];
    if (id == me_ || v.empty()) continue;  // not beating yet: not judged
    auto [it, fresh] = seen_.try_emplace(id);
    Seen& s = it->second;
    if (fresh || s.value != v) {
      s.value = v;
      s.since = now;  // read after the watch began (generation_): stillness counts from this look
      continue;
    }
    const double still = now - s.since;
    if (!s.judged && still >= silent_s_) {
      s.judged = true;
      on_silent_(id, int(rank), still);
    }
  }
}

void Liveness::loop() {
  const auto period = std::chrono::duration<double>(silent_s_ / 4);
  std::unique_lock<std::mutex> lk(mu_);
  while (!cv_.wait_for(lk, period, [this] { return stop_; })) {
    // The store is read without the lock (a slow store must not hold up watch() and unwatch()); the verdicts are
    // given under it, and only on the watch the values were read for.
    const std::vector<int> members = members_;
    const uint64_t generation = generation_;
    lk.unlock();
    beat();
    const auto values = read(members);
    lk.lock();
    if (values && generation == generation_ && !stop_) judge(*values);
  }
}

}  // namespace dd::train
