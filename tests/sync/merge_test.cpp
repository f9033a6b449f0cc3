// The pieces of transformed layer averages, without a backend: the payload codecs (within their bound, non-finite
// values kept), the outer Nesterov step (lr=1, momentum=0 is the average; a hand-computed two-step sequence), the
// merge keys of the policy spec, and ParamMerge's anchors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/error.h"
#include "core/sync/merge/codec.h"
#include "core/ops/ops.h"
#include "core/sync/merge/param_merge.h"
#include "core/sync/policy/registry.h"
#include "core/tensor/rng.h"
#include "tests/sync/random_values.h"

using namespace dd::sync;

TEST(Codec, RoundTripWithinItsBound) {
  for (Codec c : {Codec::Int8, Codec::Bf16}) {
    for (size_t n : {size_t(1), size_t(255), size_t(256), size_t(1000)}) {
      auto x = random_values(n, 7 + n, 3.0f);
      x[n / 2] = 0;  // zeros and one outlier per block: the int8 scale follows the block's largest value
      if (n > 10) x[3] = 100.0f;
      std::vector<uint8_t> enc(encoded_bytes(c, n));
      std::vector<float> y(n);
      encode(c, x.data(), n, enc.data());
      decode(c, enc.data(), n, y.data());
      const double bound = codec_error_bound(c, x.data(), n);
      double worst = 0;
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
      EXPECT_LE(worst, bound) << codec_name(c) << " n=" << n;
      if (n > 1) EXPECT_GT(bound, 0);
      EXPECT_EQ(y[n / 2], 0.0f) << "zero is exact";
    }
  }
  // A bound that is not vacuous: int8 of values in [-3, 3] is within 3/254 (plus rounding), bf16 within 2^-8 relative.
  auto x = random_values(4096, 1, 3.0f);
  EXPECT_LT(codec_error_bound(Codec::Int8, x.data(), x.size()), 3.0 / 254 * 1.01);
  EXPECT_EQ(encoded_bytes(Codec::Int8, 4096), 4096u + 4 * 16);
  EXPECT_EQ(encoded_bytes(Codec::Bf16, 4096), 2 * 4096u);
}

TEST(Codec, NonFiniteValuesStayNonFinite) {
  for (Codec c : {Codec::Int8, Codec::Bf16}) {
    std::vector<float> x(300, 1.0f);
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[280] = std::numeric_limits<float>::infinity();
    std::vector<uint8_t> enc(encoded_bytes(c, x.size()));
    std::vector<float> y(x.size());
    encode(c, x.data(), x.size(), enc.data());
    decode(c, enc.data(), x.size(), y.data());
    EXPECT_FALSE(std::isfinite(y[5])) << codec_name(c);
    EXPECT_FALSE(std::isfinite(y[280])) << codec_name(c);
  }
}

TEST(Codec, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
  const float x[3] = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), -2.5f};
  uint8_t enc[6];
  float y[3];
  encode(Codec::Bf16, x, 3, enc);
  decode(Codec::Bf16, enc, 3, y);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(y[2], -2.5f);
}

TEST(Codec, AutoCompressesTheStaleTolerantLayersHarder) {
  // Layers whose gradient direction changes least (cos near 1) get int8, the others bf16 (median split, ties int8).
  auto c = choose_codecs({0.9, 0.2, 0.95, 0.5});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0], Codec::Int8);
  EXPECT_EQ(c[1], Codec::Bf16);
  EXPECT_EQ(c[2], Codec::Int8);
  EXPECT_EQ(c[3], Codec::Int8);
  EXPECT_EQ(choose_codecs({0.3, 0.3}), std::vector<Codec>({Codec::Int8, Codec::Int8}));
  auto s = PolicySpec::parse("plsgd:h=4,compress=auto");
  auto m = parse_merge(s, "plsgd", 4);
  EXPECT_TRUE(m.compress_auto);
  EXPECT_EQ(m.compress, Codec::Bf16) << "bf16 until it has measured";
  EXPECT_EQ(make_policy(s)->describe(), "plsgd:h=4,compress=auto");
}

TEST(OuterStep, LrOneMomentumZeroIsTheAverage) {
  auto anchor = random_values(1000, 3, 2.0f), avg = random_values(1000, 4, 2.0f);
  std::vector<float> mom(1000, 0.0f), a = anchor;
  dd::ops::outer_nesterov(a.data(), mom.data(), avg.data(), 1000, 1.0f, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) {
    // a - (a - v) rounds twice: within one unit in the last place of the larger magnitude.
    const float big = std::max(std::fabs(anchor[i]), std::fabs(avg[i]));
    EXPECT_LE(std::fabs(a[i] - avg[i]), std::ldexp(big, -23)) << i;
  }
}

TEST(OuterStep, NesterovSequenceByHand) {
  // anchor 1, averages 0.5 then 0.2, lr 0.7, mu 0.9 (torch.optim.SGD(nesterov=True) on g = anchor - avg):
  // g1 = 0.5, m1 = 0.5, anchor = 1 - 0.7 (0.5 + 0.45) = 0.335; g2 = 0.135, m2 = 0.585, anchor -= 0.7 (0.135 + 0.5265).
  float a = 1, m = 0;
  const float v1 = 0.5f, v2 = 0.2f;
  dd::ops::outer_nesterov(&a, &m, &v1, 1, 0.7f, 0.9f);
  EXPECT_NEAR(a, 0.335, 1e-6);
  EXPECT_NEAR(m, 0.5, 1e-7);
  dd::ops::outer_nesterov(&a, &m, &v2, 1, 0.7f, 0.9f);
  EXPECT_NEAR(m, 0.585, 1e-6);
  EXPECT_NEAR(a, 0.335 - 0.7 * (0.135 + 0.9 * 0.585), 1e-6);
}

TEST(MergeSpec, ParsesTheMergeKeys) {
  auto s = PolicySpec::parse("dreamddp:h=8,outer=nesterov:lr=0.5,momentum=0.8,compress=int8,delay=2");
  EXPECT_EQ(s.get_str("outer", ""), "nesterov");
  EXPECT_EQ(s.get_str("outer.lr", ""), "0.5");
  EXPECT_EQ(s.get_str("outer.momentum", ""), "0.8");
  auto m = parse_merge(s, "dreamddp", 8);
  EXPECT_TRUE(m.nesterov);
  EXPECT_DOUBLE_EQ(m.outer_lr, 0.5);
  EXPECT_DOUBLE_EQ(m.outer_momentum, 0.8);
  EXPECT_EQ(m.compress, Codec::Int8);
  EXPECT_EQ(m.delay, 2);
  EXPECT_TRUE(m.transforms());
  EXPECT_EQ(m.describe(), ",delay=2,outer=nesterov:lr=0.5,momentum=0.8,compress=int8");
  // DiLoCo's defaults; the canonical text parses back to the same policy.
  auto p = make_policy(PolicySpec::parse("plsgd:h=4,outer=nesterov"));
  EXPECT_EQ(p->describe(), "plsgd:h=4,outer=nesterov:lr=0.7,momentum=0.9");
  EXPECT_EQ(make_policy(PolicySpec::parse(p->describe()))->describe(), p->describe());
  EXPECT_EQ(make_policy(PolicySpec::parse("localsgd:k=8,compress=bf16,delay=3"))->describe(),
            "localsgd:k=8,delay=3,compress=bf16");
  EXPECT_FALSE(make_policy(PolicySpec::parse("plsgd:h=4,outer=avg,compress=none"))->merge().transforms());
  // Fill-in is off by default with a transform (each extra average would be one more outer step).
  EXPECT_EQ(make_policy(PolicySpec::parse("dreamddp:h=4,compress=int8"))->describe(), "dreamddp:h=4,compress=int8");
  EXPECT_EQ(make_policy(PolicySpec::parse("dreamddp:h=4,compress=int8,fillin=1"))->describe(),
            "dreamddp:h=4,fillin=1,compress=int8");
}

TEST(MergeSpec, BadMergeKeysAreUsageErrors) {
  for (const char* bad : {"plsgd:h=4,outer=adam", "plsgd:h=4,compress=zip", "plsgd:h=4,outer=avg:lr=1",
                          "plsgd:h=4,outer=nesterov:beta=1", "plsgd:h=4,outer=nesterov:lr=0", "plsgd:h=4,outer=nesterov:lr=0.7,momentum=1",
                          "plsgd:h=4,lr=0.7", "localsgd:k=4,delay=4", "ddp:compress=int8", "hier:nodes=auto,outer=nesterov",
                          "plsgd:h=4,outer=nesterov:lr=0.7,lr=0.5"})
    EXPECT_THROW(make_policy(PolicySpec::parse(bad)), dd::UsageError) << bad;
}

// Where collectives move no data (a simulation) the spec still transforms, but nothing of the parameters' size is
// kept: no anchors, momentum or residuals, and the parameters are never read.
TEST(ParamMerge, SizesOnlyKeepsNothing) {
  ParamMerge pm(int64_t(1) << 40, dd::ops::host_device());  // far more than this machine holds, were anything allocated
  MergeSpec m;
  m.compress = Codec::Int8;
  m.nesterov = true;
  pm.configure(m, nullptr, /*sizes_only=*/true);
  EXPECT_TRUE(pm.active());
  EXPECT_EQ(pm.codec(), Codec::Int8);
  EXPECT_EQ(pm.residual_send(0), nullptr);
  EXPECT_EQ(pm.residual_owner(0), nullptr);
  pm.anchor(nullptr, 0, int64_t(1) << 40);  // a no-op: no anchors to set
}

TEST(ParamMerge, AnchorsAverageAndOuterStep) {
  const int64_t n = 6;
  std::vector<float> theta = {1, 2, 3, 4, 5, 6};
  ParamMerge pm(n, dd::ops::host_device());
  MergeSpec plain;
  pm.configure(plain, theta.data());
  EXPECT_FALSE(pm.active());
  MergeSpec m;
  m.compress = Codec::Int8;
  pm.configure(m, theta.data());  // anchors = theta
  std::vector<float> orig = {1.5f, 2, 3, 4, 5, 6.5f}, buf(n);
  pm.payload(orig.data(), 0, n, buf.data());
  EXPECT_EQ(buf[0], 0.5f);  // the payload is the change since the anchor
  EXPECT_EQ(buf[1], 0.0f);
  EXPECT_EQ(buf[5], 0.5f);
  pm.finish(0, n, buf.data());  // (an average of one rank) anchor + delta
  EXPECT_EQ(buf[0], 1.5f);
  EXPECT_EQ(buf[5], 6.5f);
  std::vector<float> buf2(n);
  pm.payload(orig.data(), 0, n, buf2.data());
  EXPECT_EQ(buf2[0], 0.0f) << "the anchor advanced to the synced value";
  // Checkpoint round trip.
  dd::ByteWriter w;
  pm.save(w);
  ParamMerge back(n, dd::ops::host_device());
  back.configure(m, theta.data());
  dd::ByteReader r(w.bytes());
  back.load(r);
  EXPECT_TRUE(r.done());
  std::vector<float> buf3(n);
  back.payload(orig.data(), 0, n, buf3.data());
  EXPECT_EQ(0, std::memcmp(buf2.data(), buf3.data(), 4 * n));
}
