// The survivors' agreement of --on-peer-loss shrink (core/train/elastic.h), ranks as threads over one file key store.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "core/train/elastic.h"
#include "tests/common/redis_server.h"
#include "tests/elastic/temp_dir.h"

namespace dd::train {
namespace {

Membership world_of(std::vector<int> members, int generation = 0) {
  Membership m;
  m.generation = generation;
  m.members = std::move(members);
  return m;
}

AgreeTiming quick() {
  AgreeTiming t;
  t.join_s = 0.3;
  t.decide_s = 0.3;
  t.poll_s = 0.005;
  return t;
}

// Each of `ranks` agrees on its own thread (with its own store handle); results in rank order.
// With `side` (start rank -> side of a partition), each rank reaches exactly the ranks on its own side.
std::vector<std::future<Membership>> agree_all(const std::string& dir, const Membership& old, std::vector<int> ranks,
                                               std::vector<int64_t> steps, AgreeTiming t = quick(),
                                               std::vector<int> side = {}) {
  std::vector<std::future<Membership>> out;
  for (size_t i = 0; i < ranks.size(); ++i)
    out.push_back(std::async(std::launch::async, [=] {
      auto store = make_file_key_store(dir);
      ReachCheck reach{std::to_string(ranks[i]), [&side, me = ranks[i]](const std::string& a) {
                         return side[size_t(me)] == side[size_t(std::stoi(a))];
                       }};
      return agree_survivors(*store, "shrink", old, ranks[i], steps[i], t, side.empty() ? nullptr : &reach);
    }));
  return out;
}

// The agreement `f` ends this rank with QuorumLost whose message holds every one of `says`; `if_not`: the failure
// when it continued instead.
void expect_quorum_lost(std::future<Membership>& f, const std::vector<std::string>& says, const char* if_not) {
  try {
    f.get();
    ADD_FAILURE() << if_not;
  } catch (const QuorumLost& e) {
    for (const auto& s : says) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(ShrinkKeyStore, ClaimIsFirstWriterWins) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  EXPECT_EQ(s->claim("g1/decision", "a"), "a");
  EXPECT_EQ(s->claim("g1/decision", "b"), "a");
  std::string v;
  EXPECT_FALSE(s->get("g1/other", &v));
  s->set("g1/other", "x");
  s->set("g1/other", "y");
  ASSERT_TRUE(s->get("g1/other", &v));
  EXPECT_EQ(v, "y");
}

// The same operations on a Redis rendezvous (a private redis-server), keys under the job's space.
TEST(ShrinkKeyStore, RedisClaimSetRemoveAndJobSpaces) {
  using testing_common::RedisServer;
  if (!RedisServer::installed()) GTEST_SKIP() << "redis-server not installed";
  RedisServer redis;
  ASSERT_TRUE(redis.up()) << "redis-server did not start: " << redis.log();
  auto s = make_key_store(redis.url() + "/job1", "shrink");
  auto other = make_key_store(redis.url() + "/job2", "shrink");
  EXPECT_EQ(s->claim("g1/decision", "a"), "a");
  EXPECT_EQ(s->claim("g1/decision", "b"), "a");
  std::string v;
  EXPECT_FALSE(other->get("g1/decision", &v));  // another job's keys never mix
  s->set("join/2", "x");
  s->set("join/2", "y");
  ASSERT_TRUE(s->get("join/2", &v));
  EXPECT_EQ(v, "y");
  s->remove("join/2");
  s->remove("join/2");  // absent: nothing to do
  EXPECT_FALSE(s->get("join/2", &v));
  EXPECT_THROW(make_key_store("redis://127.0.0.1:9/job", "shrink"), UsageError);
}

TEST(ShrinkAgree, EveryMemberReportsSameWorldAtLatestStep) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2}), {0, 1, 2}, {5, 6, 5}, AgreeTiming{});  // all report: no waiting
  for (auto& f : fs) {
    Membership m = f.get();
    EXPECT_EQ(m.generation, 1);
    EXPECT_EQ(m.members, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(m.step, 6);
  }
}

TEST(ShrinkAgree, QuorumContinuesWithoutTheLostRank) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1, 3}, {7, 7, 7});
  for (auto& f : fs) EXPECT_EQ(f.get().members, (std::vector<int>{0, 1, 3}));
}

TEST(ShrinkAgree, MinorityExitsWithQuorumLost) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1}, {7, 7});
  for (auto& f : fs)
    expect_quorum_lost(f, {"no quorum: only 2 of the 4 ranks of generation 0 (rank 0, 1)", "needs more than half (3)"},
                       "a minority of 2 of 4 continued");
}

TEST(ShrinkAgree, LateRankFindsItselfExcluded) {
  TempDir d;
  for (auto& f : agree_all(d.path, world_of({0, 1, 2}), {0, 1}, {4, 4})) EXPECT_EQ(f.get().members, (std::vector<int>{0, 1}));
  auto late = agree_all(d.path, world_of({0, 1, 2}), {2}, {4});
  expect_quorum_lost(late[0], {"excluded: rank 0, 1 (2 of 3, a quorum) formed generation 1 without this rank "
                               "(started as rank 2)"},
                     "the excluded rank continued");
}

TEST(ShrinkAgree, GenerationsUseFreshKeys) {
  TempDir d;
  auto first = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1, 2}, {3, 3, 3});
  Membership g1;
  for (auto& f : first) g1 = f.get();
  ASSERT_EQ(g1.generation, 1);
  // The next loss: generation 1's members agree under generation 2's keys; generation 1's decision is not read.
  auto second = agree_all(d.path, g1, {0, 2}, {9, 9});
  for (auto& f : second) {
    Membership m = f.get();
    EXPECT_EQ(m.generation, 2);
    EXPECT_EQ(m.members, (std::vector<int>{0, 2}));
    EXPECT_EQ(m.step, 9);
  }
}

// A partition that leaves the store reachable: rank 2 keeps reporting but none of the others reaches it on the
// ranks' network. The others form a world without it, and it learns that it was fenced out (without the probes
// all four would form a world that cannot connect).
TEST(ShrinkAgree, PartitionedRankIsFencedOut) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1, 2, 3}, {5, 5, 5, 5}, AgreeTiming{}, {0, 0, 1, 0});
  for (int r : {0, 1, 3}) EXPECT_EQ(fs[size_t(r)].get().members, (std::vector<int>{0, 1, 3})) << "rank " << r;
  expect_quorum_lost(fs[2], {"excluded: rank 0, 1, 3 (3 of 4, a quorum) formed generation 1 without this rank "
                             "(started as rank 2); fewer than half of the others reached it"},
                     "the partitioned rank continued");
}

// Two halves that cannot reach each other: neither is more than half, so every rank ends (no quorum), none hangs.
TEST(ShrinkAgree, EvenSplitEndsWithoutAWorld) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1, 2, 3}, {5, 5, 5, 5}, quick(), {0, 0, 1, 1});
  for (auto& f : fs)
    expect_quorum_lost(f, {"no quorum: of the 4 ranks of generation 0 that reported (rank 0, 1, 2, 3), only 0 reach "
                           "enough of the others on the ranks' network; a new world needs more than half (3)"},
                       "half of the world continued");
}

// With every rank reaching every other, the probes change nothing.
TEST(ShrinkAgree, ProbesThatAllReachKeepEveryone) {
  TempDir d;
  auto fs = agree_all(d.path, world_of({0, 1, 2}), {0, 1, 2}, {3, 4, 3}, AgreeTiming{}, {0, 0, 0});
  for (auto& f : fs) EXPECT_EQ(f.get().members, (std::vector<int>{0, 1, 2}));
}

// A rank its supervisor saw end (report_lost) is not waited for: with a quorum reported and every other member
// certainly lost, the survivors decide at once, long before their join window.
TEST(ShrinkAgree, CertainLossDecidesBeforeTheJoinWindow) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  report_lost(*s, "shrink", 2, "killed");
  AgreeTiming slow;
  slow.join_s = 30;
  slow.decide_s = 30;
  slow.poll_s = 0.005;
  const auto t0 = std::chrono::steady_clock::now();
  auto fs = agree_all(d.path, world_of({0, 1, 2, 3}), {0, 1, 3}, {9, 9, 9}, slow);
  for (auto& f : fs) EXPECT_EQ(f.get().members, (std::vector<int>{0, 1, 3}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  // Admitted again: the report is cleared, so a later agreement waits for it as for any member.
  Membership next = world_of({0, 1, 3, 2}, 2);
  answer_join(*s, "shrink", JoinRequest{2, "n"}, next);
  std::string v;
  EXPECT_FALSE(s->get("shrink/lost/2", &v));
}

// Rejoin: rank 0 sees only requests of ranks that are not members; the answer reaches the request's own nonce
// (a stale answer of an earlier incarnation is never taken) and removes the request.
TEST(RejoinStore, AnswerReachesTheRequestAndRemovesIt) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  post_join(*s, "shrink", 2, "old");
  post_join(*s, "shrink", 1, "x");
  Membership world = world_of({0, 1, 3}, 1);
  auto joins = pending_joins(*s, "shrink", world, 4);
  ASSERT_EQ(joins.size(), 1u);  // rank 1 is a member: its request waits
  EXPECT_EQ(joins[0].id, 2);
  EXPECT_EQ(joins[0].nonce, "old");
  post_join(*s, "shrink", 2, "new");  // started once more before the answer
  Membership next = world_of({0, 1, 3, 2}, 2);
  next.step = 40;
  answer_join(*s, "shrink", joins[0], next);
  auto left = pending_joins(*s, "shrink", next, 4);
  EXPECT_TRUE(left.empty());  // rank 2 is a member of the answered world
  left = pending_joins(*s, "shrink", world, 4);
  ASSERT_EQ(left.size(), 1u);  // the newer request stays for a later check
  EXPECT_EQ(left[0].nonce, "new");
  answer_join(*s, "shrink", left[0], next);
  EXPECT_TRUE(pending_joins(*s, "shrink", world, 4).empty());
  EXPECT_THROW(await_join(*s, "shrink", 2, "other", 0.05, 0.005), QuorumLost);
  Membership m = await_join(*s, "shrink", 2, "old", 1, 0.005);
  EXPECT_EQ(m.generation, 2);
  EXPECT_EQ(m.members, next.members);
  EXPECT_EQ(m.step, 40);
}

// A request carries the joiner's reach probe address; the nonce still names it alone, and answering removes it.
TEST(RejoinStore, RequestCarriesTheProbeAddress) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  post_join(*s, "shrink", 2, "n1", "10.0.0.3:4100");
  auto joins = pending_joins(*s, "shrink", world_of({0, 1}, 1), 3);
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_EQ(joins[0].nonce, "n1");
  EXPECT_EQ(joins[0].address, "10.0.0.3:4100");
  answer_join(*s, "shrink", joins[0], world_of({0, 1, 2}, 2));
  EXPECT_TRUE(pending_joins(*s, "shrink", world_of({0, 1}, 1), 3).empty());
}

// A joiner of another configuration is refused before the world grows: its wait ends with the reason (exit 2), its
// request is gone, and a later request of the same rank (started again, now alike) is looked at as any other.
TEST(RejoinStore, RefusedJoinerLearnsWhyAndItsRequestGoes) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  post_join(*s, "shrink", 2, "n1", "", "model=mlp:width=32\npolicy=ddp\n");
  auto joins = pending_joins(*s, "shrink", world_of({0, 1}, 1), 3);
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_EQ(joins[0].fingerprint, "model=mlp:width=32\npolicy=ddp\n");
  const std::string diff = join_fingerprint_diff("model=mlp:width=64\npolicy=ddp\n", joins[0].fingerprint);
  EXPECT_EQ(diff, "model (live world: model=mlp:width=64, this rank: model=mlp:width=32)");
  refuse_join(*s, "shrink", joins[0], "not the live world's configuration: " + diff);
  EXPECT_TRUE(pending_joins(*s, "shrink", world_of({0, 1}, 1), 3).empty());
  try {
    await_join(*s, "shrink", 2, "n1", 30, 0.005);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "rejoin: the live world refused rank 2: not the live world's configuration: " + diff);
  }
  post_join(*s, "shrink", 2, "n2", "", "model=mlp:width=64\npolicy=ddp\n");
  joins = pending_joins(*s, "shrink", world_of({0, 1}, 1), 3);
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_EQ(join_fingerprint_diff("model=mlp:width=64\npolicy=ddp\n", joins[0].fingerprint), "");
  EXPECT_EQ(join_fingerprint_diff("a=1\nprofile=p crc 1\n", "a=1\n"), "profile (live world: profile=p crc 1, this rank: none)");
}

TEST(RejoinStore, JoinerGivesUpWhenTheRunIsOver) {
  TempDir d;
  auto s = make_file_key_store(d.path);
  post_join(*s, "shrink", 1, "n");
  mark_run_done(*s, "shrink");
  try {
    await_join(*s, "shrink", 1, "n", 30, 0.005);
    FAIL() << "no throw";
  } catch (const QuorumLost& e) {
    EXPECT_NE(std::string(e.what()).find("the run ended before rank 1 could join it"), std::string::npos);
  }
}

}  // namespace
}  // namespace dd::train

namespace dd::train {
namespace {

// Rank A passed step 35's look for joiners (a broadcast it sent as root) before a peer was lost in that step; rank
// B failed earlier, in step 34. Both redo step 35. Without a common restart they would disagree on whether step 35
// looks again, and one would wait in a broadcast the other never joins. Looks are at the last step of each period
// (step + 1 a multiple of 4), so that a world grows at the first step of the next.
TEST(JoinCheck, SurvivorsAgreeOnCheckStepsAfterAShrink) {
  JoinCheck a(4, 0), b(4, 0);
  for (int64_t s = 1; s <= 34; ++s) EXPECT_EQ(a.due(s), b.due(s)) << "step " << s;
  EXPECT_TRUE(a.due(35));  // only A got there
  JoinCheck a_kept = a, b_kept = b;
  EXPECT_NE(a_kept.due(35), b_kept.due(35)) << "the disagreement restart_at settles";
  a.restart_at(35);
  b.restart_at(35);
  int checks = 0;
  for (int64_t s = 35; s <= 67; ++s) {
    const bool da = a.due(s);
    EXPECT_EQ(da, b.due(s)) << "step " << s;
    checks += da ? 1 : 0;
  }
  EXPECT_EQ(checks, 8);  // 39, 43, ..., 67: the last step of each period after the redone step, once
  EXPECT_FALSE(JoinCheck(0, 0).due(8)) << "every 0: never";
}

}  // namespace
}  // namespace dd::train
