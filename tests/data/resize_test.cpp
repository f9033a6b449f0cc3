// Bilinear resize against values computed independently with torch.nn.functional.interpolate(mode="bilinear",
// align_corners=False) (torch 2, float32; torchvision's Resize(antialias=False) gives the same), and Fashion-MNIST
// resized and replicated for a 3-channel model.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/resize.h"
#include "tests/data/fixtures.h"

namespace dd::data {
namespace {

using testing::TempDir;

// Each output is a blend of four inputs in [0, 1] with weights summing to 1, computed in float in a fixed order:
// a few roundings of numbers below 1 (2^-24 each) apart from torch's, whatever the instruction set.
constexpr float kTol = 8.0f / 16777216.0f;

// The 3 x 4 input of the reference: pixel (i, j) = ((7i + 3j) mod 11) / 11.
std::vector<float> small_image() {
  std::vector<float> x;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) x.push_back(float((7 * i + 3 * j) % 11) / 11.0f);
  return x;
}

void expect_resized(int64_t oh, int64_t ow, const std::vector<float>& want) {
  const auto x = small_image();
  std::vector<float> y(size_t(oh * ow), -1.0f);
  resize_bilinear(x.data(), 1, 3, 4, y.data(), oh, ow);
  ASSERT_EQ(want.size(), y.size());
  for (size_t k = 0; k < y.size(); ++k) EXPECT_NEAR(y[k], want[k], kTol) << oh << "x" << ow << " at " << k;
}

TEST(Resize, UpsamplingMatchesTorchInterpolate) {
  expect_resized(5, 7, {0.0f,         0.0974026099f, 0.253246784f, 0.409090966f, 0.564935148f, 0.72077924f,
                        0.818181813f, 0.25454548f,   0.351948082f, 0.507792234f, 0.463636369f, 0.419480562f,
                        0.575324714f, 0.672727287f,  0.636363626f, 0.733766198f, 0.88961041f,  0.545454502f,
                        0.201298773f, 0.357142895f,  0.454545438f, 0.418181777f, 0.515584409f, 0.671428561f,
                        0.627272725f, 0.540259719f,  0.353246689f, 0.23636362f,  0.272727281f, 0.370129883f,
                        0.525974095f, 0.681818247f,  0.766233683f, 0.350649238f, 0.0909090936f});
}

TEST(Resize, DownsamplingMatchesTorchInterpolateWithoutAntialias) {
  expect_resized(2, 3, {0.204545453f, 0.443181843f, 0.681818187f, 0.409090936f, 0.647727311f, 0.261363596f});
}

TEST(Resize, SameSizeIsTheIdentity) {
  const auto x = small_image();
  std::vector<float> y(12);
  resize_bilinear(x.data(), 1, 3, 4, y.data(), 3, 4);
  EXPECT_EQ(y, x);
}

TEST(Resize, PlanesAreResizedIndependently) {
  auto x = small_image();
  const auto first = x;
  for (float v : first) x.push_back(1.0f - v);
  std::vector<float> y(2 * 35);
  resize_bilinear(x.data(), 2, 3, 4, y.data(), 5, 7);
  for (int k = 0; k < 35; ++k) EXPECT_NEAR(y[size_t(35 + k)], 1.0f - y[size_t(k)], kTol) << k;
  EXPECT_ANY_THROW(resize_bilinear(x.data(), 1, 3, 4, y.data(), 0, 7));
}

// Fashion-MNIST fixture image s (pixel k = (7s + k) mod 256, so it has sharp wrap-around edges) resized from
// 28 x 28; reference sums and pixels of x/255 from torch.
struct FixtureRef {
  int s;
  int64_t h, w;
  double sum;
  std::vector<std::pair<std::pair<int, int>, float>> px;  // ((row, col), value)
};
const FixtureRef kFixtureRefs[] = {
    {0, 32, 32, 501.682363, {{{0, 0}, 0.0f}, {{1, 2}, 0.0958333313f}, {{16, 10}, 0.560539246f}, {{31, 31}, 0.0588235296f}, {{5, 30}, 0.576225519f}}},
    {3, 32, 32, 503.835304, {{{0, 0}, 0.0823529437f}, {{1, 2}, 0.178186283f}, {{16, 10}, 0.642892182f}, {{31, 31}, 0.141176477f}, {{5, 30}, 0.658578455f}}},
    {0, 64, 64, 2009.96475, {{{0, 0}, 0.0f}, {{1, 2}, 0.0194852948f}, {{32, 21}, 0.537377477f}, {{63, 63}, 0.0588235296f}, {{5, 62}, 0.314583331f}}},
    {3, 16, 20, 157.038435, {{{0, 0}, 0.124313727f}, {{1, 2}, 0.327450991f}, {{8, 6}, 0.690588236f}, {{15, 19}, 0.0992156863f}, {{5, 18}, 0.180000007f}}},
};

TEST(FashionMnist, ResizedAndReplicatedForThreeChannels) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "train", testing::tiny_fashion(5));
  for (const auto& ref : kFixtureRefs) {
    SCOPED_TRACE(std::to_string(ref.h) + "x" + std::to_string(ref.w) + " sample " + std::to_string(ref.s));
    const Dataset d = load_fashion_mnist(dir.path(), true, {3, ref.h, ref.w});
    ASSERT_EQ(d.size, 5);
    EXPECT_EQ(d.x_shape, (std::vector<int64_t>{3, ref.h, ref.w}));
    EXPECT_EQ(d.replicas, 3);
    const int64_t plane = ref.h * ref.w;
    EXPECT_EQ(d.xf.size(), size_t(5 * plane)) << "one plane per image is held, not three";
    Batch b;
    const int64_t idx = ref.s;
    gather(d, &idx, 1, &b);
    ASSERT_EQ(b.xf.size(), size_t(3 * plane));
    EXPECT_EQ(b.y, std::vector<int32_t>{ref.s % 10});
    // Three identical channels, each the normalized resize of x/255.
    for (int c = 1; c < 3; ++c)
      for (int64_t k = 0; k < plane; ++k) ASSERT_EQ(b.xf[size_t(c * plane + k)], b.xf[size_t(k)]) << c << " " << k;
    const float ntol = 2 * kTol / kFashionStd;  // the blend's error, scaled by the normalization, plus its rounding
    for (const auto& [rc, v] : ref.px)
      EXPECT_NEAR(b.xf[size_t(rc.first * ref.w + rc.second)], (v - kFashionMean) / kFashionStd, ntol)
          << "pixel (" << rc.first << ", " << rc.second << ")";
    double sum = 0;
    for (int64_t k = 0; k < plane; ++k) sum += double(b.xf[size_t(k)]) * kFashionStd + kFashionMean;
    EXPECT_NEAR(sum, ref.sum, double(plane) * 2 * kTol);
  }
}

TEST(FashionMnist, ThreeChannelsAt28IsTheOneChannelDataRepeated) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "t10k", testing::tiny_fashion(4));
  const Dataset one = load_fashion_mnist(dir.path(), false);
  const Dataset three = load_fashion_mnist(dir.path(), false, {3, 28, 28});
  Batch a, b;
  gather_range(one, 0, 4, &a);
  gather_range(three, 0, 4, &b);
  ASSERT_EQ(b.xf.size(), 3 * a.xf.size());
  for (int s = 0; s < 4; ++s)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 784; ++k)
        ASSERT_EQ(b.xf[size_t((s * 3 + c) * 784 + k)], a.xf[size_t(s * 784 + k)]) << s << " " << c << " " << k;
  EXPECT_EQ(a.y, b.y);
}

TEST(FashionMnist, ShapesItCannotBeMadeIntoAreRefused) {
  TempDir dir;
  testing::write_tiny_fashion(dir.path(), "train", testing::tiny_fashion(2));
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 32, 32}, {2, 28, 28}, {784}, {3, 0, 32}})
    EXPECT_THROW(load_fashion_mnist(dir.path(), true, shape), dd::UsageError) << shape.size();
}

}  // namespace
}  // namespace dd::data
