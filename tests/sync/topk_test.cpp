// compress=topk without a backend: Elias-Fano indices round trip at their fixed size, the selection keeps exactly
// the largest entries (ties to the lower index, NaN kept), error feedback conserves the sum of the payloads, and
// the merge keys parse (and refuse what they should).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "core/sync/merge/codec.h"
#include "core/sync/merge/topk.h"
#include "core/sync/policy/registry.h"
#include "core/tensor/rng.h"
#include "tests/sync/random_values.h"

using namespace dd::sync;

namespace {

TopK topk(double p, bool int8 = false) {
  TopK t;
  t.percent = p;
  t.int8 = int8;
  return t;
}

}  // namespace

TEST(EliasFano, RoundTripsAtItsFixedSize) {
  dd::Rng r(3);
  for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(100), size_t(1000), size_t(65536), size_t(300001)}) {
    for (size_t k : {size_t(1), n / 100, n / 7, n / 2, n}) {
      if (k == 0 || k > n) continue;
      // k distinct indices below n: a random subset (partial Fisher-Yates), sorted; always holding 0 or n - 1 too.
      std::vector<uint32_t> all(n);
      std::iota(all.begin(), all.end(), 0u);
      for (size_t i = 0; i < k; ++i) std::swap(all[i], all[i + size_t(r.next() % (n - i))]);
      std::vector<uint32_t> idx(all.begin(), all.begin() + long(k));
      std::sort(idx.begin(), idx.end());
      std::vector<uint8_t> enc(elias_fano_bytes(n, k) + 8, 0xab);
      elias_fano_encode(idx.data(), k, n, enc.data());
      EXPECT_EQ(enc[elias_fano_bytes(n, k)], 0xab) << "wrote past its size";
      std::vector<uint32_t> back(k);
      elias_fano_decode(enc.data(), k, n, back.data());
      EXPECT_EQ(back, idx) << "n " << n << " k " << k;
      // At most 2 + ceil(log2(n / k)) bits per index, plus one byte of rounding.
      EXPECT_LE(8.0 * double(elias_fano_bytes(n, k)), double(k) * (2 + std::ceil(std::log2(double(n) / k))) + 8)
          << "n " << n << " k " << k;
    }
  }
  // 1% of a layer: about 1.07 bytes per index (4 for a 32-bit index).
  EXPECT_LT(double(elias_fano_bytes(1000000, 10000)) / 10000, 1.1);
}

TEST(EliasFano, CorruptIndicesAreRefused) {
  const uint32_t idx[3] = {1, 5, 9};
  std::vector<uint8_t> enc(elias_fano_bytes(10, 3));
  elias_fano_encode(idx, 3, 10, enc.data());
  std::vector<uint32_t> back(3);
  std::vector<uint8_t> zero(enc.size(), 0);
  EXPECT_THROW(elias_fano_decode(zero.data(), 3, 10, back.data()), std::runtime_error) << "no high bits: too few";
  std::vector<uint8_t> ones(enc.size(), 0xff);
  EXPECT_THROW(elias_fano_decode(ones.data(), 3, 10, back.data()), std::runtime_error) << "repeated indices";
}

TEST(TopKCodec, KeepsTheLargestEntriesTiesToTheLowerIndex) {
  // 1000 values, 1% = 10 kept: 6 distinct large ones, then 6 equal ones of which the 4 lowest indices are kept.
  std::vector<float> x(1000, 0.001f);
  const std::vector<size_t> big = {999, 3, 500, 17, 250, 42};
  for (size_t i = 0; i < big.size(); ++i) x[big[i]] = (i % 2 ? -1.0f : 1.0f) * float(10 + i);
  for (size_t i : {700, 100, 900, 300, 600, 800}) x[i] = -5;
  x[0] = x[1] = 0.001f;
  const TopK t = topk(1);
  ASSERT_EQ(topk_count(x.size(), t), 10u);
  EXPECT_EQ(topk_bytes(x.size(), t), 4 * 10 + elias_fano_bytes(1000, 10));
  std::vector<uint8_t> enc(topk_bytes(x.size(), t));
  std::vector<float> sent(x.size());
  topk_encode(x.data(), x.size(), t, enc.data(), sent.data());
  std::vector<size_t> kept;
  for (size_t i = 0; i < x.size(); ++i)
    if (sent[i] != 0) kept.push_back(i);
  EXPECT_EQ(kept, (std::vector<size_t>{3, 17, 42, 100, 250, 300, 500, 600, 700, 999}));
  for (size_t i : kept) EXPECT_EQ(sent[i], x[i]) << "float32 values are sent exactly";
  std::vector<double> sum(x.size(), 0.5);
  topk_decode_add(enc.data(), x.size(), t, sum.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(sum[i], 0.5 + double(sent[i])) << i;
  // NaN counts as largest: the anomaly guard downstream sees it.
  x[123] = std::numeric_limits<float>::quiet_NaN();
  topk_encode(x.data(), x.size(), t, enc.data(), sent.data());
  EXPECT_TRUE(std::isnan(sent[123]));
  EXPECT_EQ(sent[700], 0.0f) << "the NaN took the last tie's place";
}

TEST(TopKCodec, CountsAndBytes) {
  EXPECT_EQ(topk_count(1, topk(1)), 1u);
  EXPECT_EQ(topk_count(100, topk(1)), 1u);
  EXPECT_EQ(topk_count(101, topk(1)), 2u);  // ceil
  EXPECT_EQ(topk_count(1000, topk(50)), 500u);
  EXPECT_EQ(topk_count(3, topk(0.001)), 1u);
  // values=int8: one code per kept value plus a float32 scale per 256 of them.
  EXPECT_EQ(topk_bytes(100000, topk(1, true)), 1000 + 4 * 4 + elias_fano_bytes(100000, 1000));
  // The goal: at 1%, at most 3% of float32's bytes (int8 values: under 1%).
  EXPECT_LT(double(topk_bytes(100000, topk(1))), 0.03 * 4 * 100000);
  EXPECT_LT(double(topk_bytes(100000, topk(1, true))), 0.01 * 4 * 100000);
}

// Error feedback: over T syncs, what was sent plus the final residual is the sum of the payloads, up to the float
// rounding of p = x + e and e = p - sent at each step (half an ulp of each, bounded by 2^-24 of its magnitude).
TEST(TopKCodec, ErrorFeedbackSumsToTheUncompressedTotal) {
  for (bool int8 : {false, true}) {
    const size_t n = 3000;
    const int T = 50;
    const TopK t = topk(1, int8);
    std::vector<float> e(n, 0), p(n), sent(n);
    std::vector<uint8_t> enc(topk_bytes(n, t));
    std::vector<double> total_x(n, 0), total_sent(n, 0), bound(n, 0);
    size_t ever_sent = 0;
    std::vector<bool> was_sent(n, false);
    for (int s = 0; s < T; ++s) {
      const auto x = random_values(n, 1000 + uint64_t(s), 0.01f);
      for (size_t i = 0; i < n; ++i) p[i] = x[i] + e[i];
      topk_encode(p.data(), n, t, enc.data(), sent.data());
      for (size_t i = 0; i < n; ++i) {
        e[i] = p[i] - sent[i];
        total_x[i] += x[i];
        total_sent[i] += sent[i];
        bound[i] += (std::fabs(double(p[i])) + std::fabs(double(e[i]))) * std::ldexp(1.0, -24);
        if (sent[i] != 0 && !was_sent[i]) was_sent[i] = true, ++ever_sent;
      }
    }
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      const double err = std::fabs(total_sent[i] + e[i] - total_x[i]);
      EXPECT_LE(err, bound[i]) << i;
      worst = std::max(worst, err / std::max(bound[i], 1e-30));
    }
    // Not vacuous: the residual carries real mass, and feedback brings entries that were once small to the wire.
    double residual = 0;
    for (float v : e) residual = std::max(residual, double(std::fabs(v)));
    EXPECT_GT(residual, 0.01) << "int8 " << int8;
    EXPECT_GT(ever_sent, size_t(T) * n / 100 / 2) << "int8 " << int8;
  }
}

TEST(TopKSpec, ParsesAndDescribes) {
  auto m = parse_merge(PolicySpec::parse("plsgd:h=4,compress=topk:p=1"), "plsgd", 4);
  EXPECT_EQ(m.compress, Codec::TopK);
  EXPECT_DOUBLE_EQ(m.topk.percent, 1.0);
  EXPECT_FALSE(m.topk.int8);
  EXPECT_TRUE(m.transforms());
  EXPECT_FALSE(m.owner_residual());
  EXPECT_EQ(m.describe(), ",compress=topk:p=1");
  auto m2 = parse_merge(PolicySpec::parse("localsgd:k=8,compress=topk:p=0.5,values=int8,delay=2"), "localsgd", 8);
  EXPECT_DOUBLE_EQ(m2.topk.percent, 0.5);
  EXPECT_TRUE(m2.topk.int8);
  EXPECT_EQ(m2.describe(), ",delay=2,compress=topk:p=0.5,values=int8");
  for (const char* s : {"plsgd:h=4,compress=topk:p=1", "dreamddp:h=8,delay=2,outer=nesterov,compress=topk:p=2,values=int8",
                        "localsgd:k=4,compress=topk:p=0.1,values=fp32", "plsgd:h=4,compress=topk:p=0.123456789"}) {
    const auto d = make_policy(PolicySpec::parse(s))->describe();
    EXPECT_EQ(make_policy(PolicySpec::parse(d))->describe(), d) << s;
  }
}

TEST(TopKSpec, BadSpecsAreUsageErrors) {
  for (const char* bad :
       {"plsgd:h=4,compress=topk", "plsgd:h=4,compress=topk:p=0", "plsgd:h=4,compress=topk:p=50.5",
        "plsgd:h=4,compress=topk:p=-1", "plsgd:h=4,compress=topk:p=nan", "plsgd:h=4,compress=topk:p=inf",
        "plsgd:h=4,compress=topk:p=abc", "plsgd:h=4,compress=topk:p=1x", "plsgd:h=4,compress=topk:1",
        "plsgd:h=4,compress=topk:p=1,values=bf16", "plsgd:h=4,compress=topk:values=int8",
        "plsgd:h=4,compress=int8:p=1", "plsgd:h=4,compress=int8,values=int8", "plsgd:h=4,compress=topk:p=1,p=2",
        "ddp:compress=topk:p=1", "plsgd:h=4,p=1"})
    EXPECT_THROW(make_policy(PolicySpec::parse(bad)), dd::UsageError) << bad;
}
