// Heartbeats for shrink without restart (docs/elastic.md "Shrink without restart", its silent members): a member
// that stops answering but whose process lives (stopped, frozen, its host gone without closing its sockets) fails a
// collective only at its timeout, and the survivors would then wait out the join window for it. Every member
// instead counts a heartbeat in the rendezvous key store from a thread of its own, and watches the other members' counters: a member whose counter has
// not moved for `silent_s` is judged lost at once. The verdict goes to a callback (the trainer records the member as
// lost for the agreement and fails this rank's pending operations with it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/key_store.h"

namespace dd::train {

class Liveness {
 public:
  // Called on the heartbeat thread, at most once per member per watch(): the member's start rank, its index in the
  // watched members (its rank in the current world) and how long its counter has stood still.
  using OnSilent = std::function<void(int id, int rank, double still_s)>;

  // Beats under `<prefix>/beat/<me>` every silent_s / 4 (the value: `nonce` and a counter, so that a restarted
  // process never repeats its predecessor's value). silent_s > 0. The store must allow calls from two threads.
  Liveness(KeyStore& store, std::string prefix, int me, std::string nonce, double silent_s, OnSilent on_silent);
  ~Liveness();  // stops the thread (within one beat)
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Watches these members (start ranks, in rank order; this rank among them is skipped). A member is judged only
  // once its counter has been seen, and its stillness counts from the first look after this call.
  void watch(const std::vector<int>& members);
  // Stops watching; when it returns no callback runs or will run until the next watch().
  void unwatch();
  double silent_s() const { return silent_s_; }

 private:
  void loop();
  void beat();
  // The members' counters, "" for one not beating yet; nothing when the store cannot be read.
  std::optional<std::vector<std::string>> read(const std::vector<int>& members);
  void judge(const std::vector<std::string>& values);

  KeyStore& store_;
  const std::string prefix_, nonce_;
  const int me_;
  const double silent_s_;
  OnSilent on_silent_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  long long count_ = 0;
  std::vector<int> members_;
  uint64_t generation_ = 0;  // counts watch() and unwatch(): values read for an earlier watch are not judged
  struct Seen {
    std::string value;
    double since = 0;  // when the value last changed (or the watch began), this rank's clock
    bool judged = false;
  };
  std::map<int, Seen> seen_;
  double last_judge_t_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace dd::train
