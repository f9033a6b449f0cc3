// choose_in_step: without contention the paper's choice, bitwise; with it, Local SGD's schedule where the overlap
// costs more than it hides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/sync/profile/profile_carry.h"
#include "core/sync/schedule/schedule_choice.h"
#include "core/sync/schedule/schedule_solver.h"

using namespace dd::sync;

TEST(ScheduleChoice, WithoutContentionIsTheSolverScheduleWithFillIn) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int L = 2 + int(rng() % 8), H = 1 + int(rng() % 6);
    std::vector<double> b(L), c(L);
    for (int l = 0; l < L; ++l) b[l] = u(rng), c[l] = 3 * u(rng);
    const auto solved = schedule_phases(b, c, H);
    for (bool fillin : {false, true}) {
      const auto ch = choose_in_step(b, c, H, solved, fillin, {});
      EXPECT_EQ(ch.phase, solved) << trial;
      EXPECT_EQ(ch.fill, fillin ? fill_in(b, c, H, solved) : FillIn(size_t(L))) << trial;
      EXPECT_FALSE(ch.local_sgd) << trial;  // Local SGD is a feasible schedule of the paper's model
      EXPECT_EQ(ch.layerwise_s, modelled_time(b, c, H, solved, fillin ? &ch.fill : nullptr)) << trial;
      EXPECT_EQ(ch.localsgd_s, localsgd_time(b, c, H)) << trial;
    }
  }
}

// Two layers, H = 2, the transfer of the first in backward order overlapping the other's backward. Without
// contention layer-wise wins (it hides that transfer); with compute and communication both x3 while they overlap,
// Local SGD's blocking average (which overlaps nothing) is faster and is chosen.
TEST(ScheduleChoice, HeavyContentionPicksLocalSgd) {
  const std::vector<double> b{1, 1}, c{1, 1};
  const auto solved = schedule_phases(b, c, 2);
  const auto free = choose_in_step(b, c, 2, solved, true, {});
  EXPECT_FALSE(free.local_sgd);
  EXPECT_LT(free.layerwise_s, free.localsgd_s);
  const auto shared = choose_in_step(b, c, 2, solved, true, Contention{2, 2});
  EXPECT_TRUE(shared.local_sgd);
  EXPECT_GT(shared.layerwise_s, shared.localsgd_s);
  EXPECT_EQ(shared.localsgd_s, localsgd_time(b, c, 2));
}

// fused_comm: a layer that joins its launch-order neighbour's bucket (same phase, bucket under the cap) pays no
// latency of its own; the first of each run, and the first after a full bucket, pays it.
TEST(ScheduleChoice, FusedCommTakesTheLatencyOffLayersThatJoinABucket) {
  const std::vector<double> c{5, 5, 5, 5};
  const std::vector<int64_t> bytes{10, 10, kFusedCap, 10};
  // Launch order 3, 2, 1, 0. Phases 0 0 0 1: layer 3 starts a run; 2 starts another; 1 joins 2 but 2 filled the
  // bucket to the cap, so 1 starts a new bucket; 0 joins 1.
  EXPECT_EQ(fused_comm(c, bytes, {0, 0, 0, 1}, 2.0), (std::vector<double>{3, 5, 5, 5}));
  EXPECT_EQ(fused_comm(c, {10, 10, 10, 10}, {0, 0, 0, 0}, 2.0), (std::vector<double>{3, 3, 3, 5}));
  EXPECT_EQ(fused_comm(c, {10, 10, 10, 10}, {0, 1, 0, 1}, 2.0), c);
  // c = 2 + bytes / 10: the fit recovers the intercept; proportional times have none.
  EXPECT_NEAR(fitted_alpha({3, 4, 6}, {10, 20, 40}), 2.0, 1e-12);
  EXPECT_EQ(fitted_alpha({1, 2, 4}, {10, 20, 40}), 0.0);
}

// A per-collective latency the solver's model does not see in fused buckets: an interleaved schedule pays it at
// every layer, plsgd's contiguous split once per bucket. With the layers' sizes, the choice sees it and takes the
// split; with times proportional to the sizes (no latency) it keeps the solver's phases, bitwise.
TEST(ScheduleChoice, FusedLatencyPrefersContiguousPhases) {
  const int L = 12, H = 3;
  std::vector<double> b(L, 0.01), c(L);
  std::vector<int64_t> bytes(L);
  for (int l = 0; l < L; ++l) bytes[size_t(l)] = 1000 + 100 * l, c[l] = 0.02 + 1e-5 * double(bytes[size_t(l)]);
  std::vector<int> interleaved(L);
  for (int l = 0; l < L; ++l) interleaved[l] = l % H;
  const auto with = choose_in_step(b, c, H, interleaved, false, {}, bytes);
  EXPECT_TRUE(with.fused_plsgd);
  EXPECT_EQ(with.phase, contiguous_groups(c, H));
  EXPECT_NEAR(with.alpha_s, 0.02, 1e-9);
  EXPECT_LT(with.fused_plsgd_s, 0.99 * with.fused_solved_s);
  EXPECT_EQ(with.layerwise_s, modelled_time(b, fused_comm(c, bytes, with.phase, with.alpha_s), H, with.phase,
                                            &with.fill));
  std::vector<double> prop(L);
  for (int l = 0; l < L; ++l) prop[l] = 3e-5 * double(bytes[size_t(l)]);
  const auto without = choose_in_step(b, prop, H, interleaved, false, {}, bytes);
  EXPECT_FALSE(without.fused_plsgd);
  EXPECT_EQ(without.phase, interleaved);
  EXPECT_EQ(without.layerwise_s, modelled_time(b, prop, H, interleaved, &without.fill));
}

// Two layers, one per step of H=2: every assignment waits the same under the model, so the solver's phases and
// plsgd's split tie. A tie keeps plsgd's split (the model cannot tell the solver's phases as better).
TEST(ScheduleChoice, FusedTieKeepsContiguousPhases) {
  const std::vector<double> b{0.01, 0.01};
  const std::vector<int64_t> bytes{1000, 2000};
  const std::vector<double> c{0.01 + 1e-5 * 1000, 0.01 + 1e-5 * 2000};  // alpha 10 ms
  const auto plsgd = contiguous_groups(c, 2);
  std::vector<int> other = plsgd;
  std::swap(other[0], other[1]);
  ASSERT_NE(other, plsgd);
  const auto choice = choose_in_step(b, c, 2, other, false, {}, bytes);
  EXPECT_EQ(choice.fused_solved_s, choice.fused_plsgd_s);
  EXPECT_TRUE(choice.fused_plsgd);
  EXPECT_EQ(choice.phase, plsgd);
  // Solved as plsgd's split already: nothing to replace.
  EXPECT_FALSE(choose_in_step(b, c, 2, plsgd, false, {}, bytes).fused_plsgd);
}

// fit_comm (comm_fit.h): on a shaped link a large all-reduce hides the per-collective latency. The rate comes from
// the large sizes and the latency from the small ones; a least-squares line through all of them would come out
// steeper than any large transfer ran and put the difference in a smaller intercept.
TEST(CommFit, RateFromTheLargestLatencyFromTheSmall) {
  const double rate = 117.5e6, alpha = 5e-4;  // bytes/s and seconds
  const std::vector<int64_t> S{1024, 10240, 102400, 1 << 20, 10 << 20, 16 << 20};
  std::vector<double> c;
  for (int64_t s : S) c.push_back((s < (1 << 20) ? alpha : 0.0) + double(s) / rate);
  const CommFit f = fit_comm(S, c);
  EXPECT_NEAR(f.per_byte_s, 1 / rate, 1e-6 / rate);
  EXPECT_NEAR(f.alpha_s, alpha, 1e-9);
  // The large all-reduce as measured, within the latency the fit adds to it.
  EXPECT_NEAR(f.at(16 << 20), c.back(), alpha + 1e-9);
  const double ls_alpha = fitted_alpha(c, S);
  EXPECT_EQ(ls_alpha, f.alpha_s);  // the schedule model takes the same fit
  // Times that are not finite and sizes that are not positive do not count.
  auto withbad = S;
  auto cbad = c;
  withbad.push_back(0), cbad.push_back(1.0);
  withbad.push_back(4096), cbad.push_back(NAN);
  const CommFit g = fit_comm(withbad, cbad);
  EXPECT_EQ(g.per_byte_s, f.per_byte_s);
  EXPECT_EQ(g.alpha_s, f.alpha_s);
}

// Sizes within 10x of each other: the least-squares line (exact on a line), clamped; nothing at all: zeros.
TEST(CommFit, NarrowSizesTakeTheLine) {
  const CommFit f = fit_comm({10, 20, 40}, {3, 4, 6});
  EXPECT_NEAR(f.alpha_s, 2.0, 1e-12);
  EXPECT_NEAR(f.per_byte_s, 0.1, 1e-12);
  EXPECT_EQ(fit_comm({10, 20, 40}, {1, 2, 4}).alpha_s, 0.0);
  const CommFit one = fit_comm({100}, {2.0});
  EXPECT_EQ(one.alpha_s, 0.0);
  EXPECT_EQ(one.per_byte_s, 0.02);
  EXPECT_EQ(fit_comm({}, {}).per_byte_s, 0.0);
  EXPECT_EQ(fit_comm({10, 20}, {5.0, 1.0}).alpha_s, 0.0);  // a falling line: a rate, no latency
}

// The engine times the model's own sizes: its smallest layer, its largest, the largest bucket it sends, and one
// between; each clamped to [1 KiB, kCommProbeCap].
TEST(CommFit, ProbeSizesComeFromTheModel) {
  const std::vector<int64_t> layers{100, 4096, 4 << 20, 8000};
  const auto s = comm_probe_sizes(layers, 25 << 20);
  const int64_t total = 100 + 4096 + (4 << 20) + 8000;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.front(), 1024);
  EXPECT_EQ(s[2], 4 << 20);
  EXPECT_EQ(s.back(), total);  // Local SGD's one bucket
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  const auto capped = comm_probe_sizes({64 << 20, 1 << 10}, 25 << 20);
  EXPECT_EQ(capped.back(), kCommProbeCap);
  EXPECT_EQ(comm_probe_sizes({}, 25 << 20), (std::vector<int64_t>{1024}));
}

// scale_profile (profile_carry.h): a ring all-reduce on n ranks pays its latency 2(n-1) times and sends 2(n-1)/n of
// the buffer per rank; backward times and contention do not depend on the world size.
TEST(ProfileCarry, ScalesTheAllReduceModelAsARing) {
  std::vector<LayerMeta> layers{{"a", "linear", 256, 1024}, {"b", "linear", 1 << 16, 1 << 18},
                                {"c", "linear", 1 << 20, 4 << 20}, {"d", "linear", 1 << 20, 4 << 20}};
  const double alpha = 2e-4, per_byte = 1e-8;
  LayerTimes t;
  for (const auto& l : layers) t.backward_s.push_back(1e-3), t.comm_s.push_back(alpha + per_byte * double(l.bytes));
  t.contention = Contention{0.1, 0.2};
  EXPECT_EQ(scale_profile(t, layers, 4, 4).comm_s, t.comm_s);  // the same world: the profile as it was
  const LayerTimes s = scale_profile(t, layers, 4, 2);         // latency x 1/3, bytes x (1/2) / (3/4)
  EXPECT_EQ(s.backward_s, t.backward_s);
  EXPECT_EQ(s.contention.compute, 0.1);
  EXPECT_EQ(s.contention.comm, 0.2);
  std::vector<int64_t> bytes;
  for (const auto& l : layers) bytes.push_back(l.bytes);
  const CommFit f = fit_comm(bytes, t.comm_s);
  for (size_t l = 0; l < layers.size(); ++l) {
    const double S = double(layers[l].bytes);
    EXPECT_DOUBLE_EQ(s.comm_s[l], f.alpha_s / 3 + f.per_byte_s * S * (0.5 / 0.75)) << l;
    // Against the model the times were made from: the fit reads the large layers' rate with the latency they carry
    // (alpha / 4 MiB per byte, 0.5% here) and the small layers' latency after that rate (3%).
    const double truth = alpha / 3 + per_byte * S * (0.5 / 0.75);
    EXPECT_NEAR(s.comm_s[l], truth, 0.05 * truth) << l;
  }
  EXPECT_THROW(scale_profile(t, layers, 1, 2), std::invalid_argument);
  EXPECT_THROW(scale_profile(t, {layers[0]}, 4, 2), std::invalid_argument);
  // Equal carried profiles print alike; another world or another time does not.
  ProfileCarry a{t, 4}, b{t, 4}, c{t, 3};
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), c.fingerprint());
  b.times.comm_s[1] += 1e-9;
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(ProfileCarry{}.fingerprint(), "none");
}

// What a joiner receives: the carried profile as text and back, every double bit for bit; none stays none, and a
// damaged text is refused.
TEST(ProfileCarry, TextRoundTripIsBitwise) {
  LayerTimes t;
  t.backward_s = {1.0 / 3, 2e-7, 0.0, 5.5};
  t.comm_s = {std::nextafter(1e-3, 1.0), 3e-4, 7.25e-5, 0.1};
  t.contention.compute = 0.11;
  t.contention.comm = 0.27;
  const ProfileCarry a{t, 4};
  const ProfileCarry b = ProfileCarry::decode(a.encode());
  EXPECT_EQ(b.world, 4);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(b.times.backward_s, t.backward_s);
  EXPECT_EQ(b.times.comm_s, t.comm_s);
  EXPECT_EQ(b.times.contention.comm, t.contention.comm);
  EXPECT_EQ(ProfileCarry().encode(), "");
  EXPECT_FALSE(ProfileCarry::decode("").has());
  std::string bad = a.encode();
  bad.pop_back();
  EXPECT_THROW(ProfileCarry::decode(bad), std::invalid_argument);
  EXPECT_THROW(ProfileCarry::decode("4;x"), std::invalid_argument);
}
