// Heartbeats of --on-peer-loss shrink (core/train/liveness.h): members as objects over one file key store.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "core/train/liveness.h"
#include "tests/elastic/temp_dir.h"

namespace dd::train {
namespace {

struct Verdicts {
  std::mutex mu;
  std::vector<std::pair<int, int>> seen;  // (id, rank)
  std::vector<double> still;
  double first_t = -1;
  Liveness::OnSilent callback() {
    return [this](int id, int rank, double s) {
      std::lock_guard<std::mutex> lk(mu);
      if (first_t < 0) first_t = now_s();
      seen.push_back({id, rank});
      still.push_back(s);
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lk(mu);
    return seen.size();
  }
};

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST(Liveness, LiveMembersAreNeverJudged) {
  TempDir d;
  auto store = make_file_key_store(d.path);
  Verdicts v0, v1, v2;
  Liveness a(*store, "shrink", 0, "a", 1.0, v0.callback());
  Liveness b(*store, "shrink", 1, "b", 1.0, v1.callback());
  Liveness c(*store, "shrink", 2, "c", 1.0, v2.callback());
  for (Liveness* l : {&a, &b, &c}) l->watch({0, 1, 2});
  sleep_s(2.5);  // ten beats each
  EXPECT_EQ(v0.count() + v1.count() + v2.count(), 0u);
}

TEST(Liveness, AMemberThatStopsBeatingIsJudgedOnceWithinTheSilence) {
  TempDir d;
  auto store = make_file_key_store(d.path);
  Verdicts v0, v2;
  Liveness a(*store, "shrink", 0, "a", 0.4, v0.callback());
  auto b = std::make_unique<Liveness>(*store, "shrink", 1, "b", 0.4, Liveness::OnSilent([](int, int, double) {}));
  Liveness c(*store, "shrink", 2, "c", 0.4, v2.callback());
  // Start rank 2 is rank 1 of this world, start rank 1 rank 2: the verdict names both.
  a.watch({0, 2, 1});
  c.watch({0, 2, 1});
  sleep_s(0.3);
  const double t_stop = now_s();
  b.reset();  // its counter stands still from here (its key stays in the store)
  sleep_s(1.4);
  for (Verdicts* v : {&v0, &v2}) {
    std::lock_guard<std::mutex> lk(v->mu);
    ASSERT_EQ(v->seen.size(), 1u);  // once, and only the silent one
    EXPECT_EQ(v->seen[0], std::make_pair(1, 2));
    EXPECT_GE(v->still[0], 0.4);
    // Within the silence, one beat period of its own and one of the watcher's (0.1 s each), and scheduling slack.
    EXPECT_LE(v->first_t - t_stop, 0.4 + 0.1 + 0.1 + 0.5);
  }
}

TEST(Liveness, NothingIsJudgedWhileUnwatchedOrBeforeAFirstBeat) {
  TempDir d;
  auto store = make_file_key_store(d.path);
  Verdicts v0;
  Liveness a(*store, "shrink", 0, "a", 0.2, v0.callback());
  a.watch({0, 1, 2});  // ranks 1 and 2 never beat: a member not seen yet is not judged
  sleep_s(0.6);
  EXPECT_EQ(v0.count(), 0u);
  {
    Liveness b(*store, "shrink", 1, "b", 0.2, Liveness::OnSilent([](int, int, double) {}));
    sleep_s(0.15);
  }
  a.unwatch();  // then rank 1 stops; unwatched, no verdict
  sleep_s(0.6);
  EXPECT_EQ(v0.count(), 0u);
  a.watch({0, 1});  // watched again: its stillness counts from this watch
  sleep_s(0.1);
  EXPECT_EQ(v0.count(), 0u);
  sleep_s(0.5);
  EXPECT_EQ(v0.count(), 1u);
}

}  // namespace
}  // namespace dd::train
