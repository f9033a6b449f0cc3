// The ResNet blocks (basic and bottleneck, with and without downsample) against a straightforward reference in
// double: forward values, and the analytic gradients of every parameter and of the input against central
// differences of that reference (double, so the differences are exact to ~1e-9 and the tolerance only has to
// cover our float arithmetic).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/models/resnet_blocks.h"
#include "core/tensor/rng.h"

using namespace dd;
using models::ResBlock;

namespace {

using Vec = std::vector<double>;

Vec conv_d(const Vec& x, const Vec& w, int64_t N, int64_t C, int64_t OC, int64_t H, int64_t W, int64_t k, int64_t s,
           int64_t p, int64_t& Ho, int64_t& Wo) {
  Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
  Vec y(size_t(N * OC * Ho * Wo), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) {
                const int64_t h = oh * s - p + i, ww = ow * s - p + j;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += x[size_t(((n * C + c) * H + h) * W + ww)] * w[size_t(((o * C + c) * k + i) * k + j)];
              }
          y[size_t(((n * OC + o) * Ho + oh) * Wo + ow)] = acc;
        }
  return y;
}

// Training-mode BatchNorm: batch mean and biased variance, eps 1e-5.
Vec bn_d(const Vec& x, const Vec& gb, int64_t N, int64_t C, int64_t HW) {
  Vec y(x.size());
  const double M = double(N * HW);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) m += x[size_t((n * C + c) * HW + i)];
    m /= M;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) v += std::pow(x[size_t((n * C + c) * HW + i)] - m, 2);
    v /= M;
    const double inv = 1.0 / std::sqrt(v + 1e-5);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const size_t at = size_t((n * C + c) * HW + i);
        y[at] = (x[at] - m) * inv * gb[size_t(c)] + gb[size_t(C + c)];
      }
  }
  return y;
}

Vec relu_d(Vec v) {
  for (auto& x : v) x = std::max(x, 0.0);
  return v;
}

struct Case {
  bool bottleneck;
  int64_t N, C, width, stride, H;
};

// A block on the host with its layers bound to vectors; the parameters as doubles for the reference.
struct HostBlock {
  std::vector<std::unique_ptr<nn::Layer>> layers;
  std::vector<std::string> names;
  std::vector<std::vector<float>> p, g, b;
  std::unique_ptr<ResBlock> blk;

  explicit HostBlock(const Case& c) {
    auto add = [&](const std::string& n, std::unique_ptr<nn::Layer> l) {
      names.push_back(n);
      layers.push_back(std::move(l));
      return layers.back().get();
    };
    blk = std::make_unique<ResBlock>(ops::host_device(), c.bottleneck, c.C, c.width, c.stride, c.H, c.H, add);
    Rng rng(7);
    for (size_t i = 0; i < layers.size(); ++i) {
      auto& l = *layers[i];
      p.emplace_back(size_t(l.num_params()));
      g.emplace_back(size_t(l.num_params()), 0.f);
      b.emplace_back(size_t(std::max<int64_t>(l.num_buffers(), 1)));
      l.bind(int(i), ops::host_device(), p[i].data(), g[i].data(), 0, b[i].data(), 0);
      l.init(rng);
      // BatchNorm starts at gamma 1, beta 0; other values test that both are used.
      if (std::string(l.kind()) == "batchnorm")
        for (auto& v : p[i]) v = 0.5f + rng.uniform();
    }
  }
  Vec param_d(const std::string& n) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return Vec(p[i].begin(), p[i].end());
    return {};
  }
};

// The block in double, from the layers' current parameters (pd: name -> values).
Vec block_ref(const Case& c, const HostBlock& hb, const Vec& x, const std::vector<Vec>& pd) {
  auto P = [&](const std::string& n) -> const Vec& {
    for (size_t i = 0; i < hb.names.size(); ++i)
      if (hb.names[i] == n) return pd[i];
    throw std::runtime_error("no layer " + n);
  };
  const int64_t N = c.N, w = c.width, OC = hb.blk->OC;
  int64_t h = c.H, ho = 0, wo = 0, h1 = 0;
  // One statement per conv: the output size it sets is read by the next call.
  Vec y;
  if (c.bottleneck) {
    Vec a = conv_d(x, P("conv1"), N, c.C, w, h, h, 1, 1, 0, h1, wo);
    a = relu_d(bn_d(a, P("bn1"), N, w, h1 * h1));
    Vec b = conv_d(a, P("conv2"), N, w, w, h1, h1, 3, c.stride, 1, ho, wo);
    b = relu_d(bn_d(b, P("bn2"), N, w, ho * ho));
    int64_t h3 = 0;
    y = conv_d(b, P("conv3"), N, w, OC, ho, ho, 1, 1, 0, h3, wo);
    y = bn_d(y, P("bn3"), N, OC, ho * ho);
  } else {
    Vec a = conv_d(x, P("conv1"), N, c.C, w, h, h, 3, c.stride, 1, ho, wo);
    a = relu_d(bn_d(a, P("bn1"), N, w, ho * ho));
    int64_t h2 = 0;
    y = conv_d(a, P("conv2"), N, w, w, ho, ho, 3, 1, 1, h2, wo);
    y = bn_d(y, P("bn2"), N, OC, ho * ho);
  }
  Vec sc = x;
  if (hb.blk->dsconv) {
    int64_t hs = 0;
    sc = conv_d(x, P("downsample.0"), N, c.C, OC, h, h, 1, c.stride, 0, hs, wo);
    sc = bn_d(sc, P("downsample.1"), N, OC, hs * hs);
  }
  for (size_t i = 0; i < y.size(); ++i) y[i] += sc[i];
  return relu_d(y);
}

struct Hook : nn::BackwardHook {
  std::vector<int> order;
  void on_layer_ready(int i) override { order.push_back(i); }
};

void block_case(const Case& c) {
  SCOPED_TRACE(std::string(c.bottleneck ? "bottleneck" : "basic") + " N=" + std::to_string(c.N) + " C=" +
               std::to_string(c.C) + " width=" + std::to_string(c.width) + " stride=" + std::to_string(c.stride) +
               " H=" + std::to_string(c.H));
  HostBlock hb(c);
  ResBlock& blk = *hb.blk;
  ASSERT_EQ(blk.dsconv != nullptr, c.stride != 1 || c.C != blk.OC);
  Rng rng(3);
  std::vector<float> x(size_t(c.N * c.C * c.H * c.H)), R(size_t(c.N * blk.OC * blk.Ho * blk.Wo));
  for (auto& v : x) v = rng.normal();
  for (auto& v : R) v = rng.normal();
  models::BlockScratch s(ops::host_device());
  const float* y = blk.forward(x.data(), c.N, true, s);

  std::vector<Vec> pd;
  for (auto& v : hb.p) pd.emplace_back(v.begin(), v.end());
  const Vec xd(x.begin(), x.end());
  const Vec yr = block_ref(c, hb, xd, pd);
  ASSERT_EQ(yr.size(), R.size());
  // Float forward vs double: per element a few float roundings of O(1) values (BatchNorm normalizes every
  // stage), so 1e-4 absolute is ~1000 float epsilons.
  double worst = 0;
  for (size_t i = 0; i < yr.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - yr[i]));
  EXPECT_LT(worst, 1e-4) << "forward max |ours - reference|";

  std::vector<float> dy(R);
  Hook hook;
  float* dx = blk.backward(dy.data(), c.N, &hook, s);
  ASSERT_NE(dx, dy.data());
  // Every layer once, in strictly decreasing index order.
  ASSERT_EQ(hook.order.size(), hb.layers.size());
  for (size_t i = 0; i < hook.order.size(); ++i) EXPECT_EQ(hook.order[i], int(hb.layers.size() - 1 - i));

  auto loss = [&](const Vec& xv, const std::vector<Vec>& pv) {
    const Vec yy = block_ref(c, hb, xv, pv);
    double l = 0;
    for (size_t i = 0; i < yy.size(); ++i) l += yy[i] * R[i];
    return l;
  };
  // Central differences of the double reference with a step far below any ReLU kink's distance (a pre-activation
  // within 1e-6 of zero is a ~1e-6 chance per element) and far above double rounding (~1e-16 / 1e-6).
  const double h = 1e-6;
  auto compare = [&](const std::string& what, const std::vector<float>& ana, auto&& perturb) {
    double gmax = 0;
    for (float a : ana) gmax = std::max(gmax, std::fabs(double(a)));
    ASSERT_GT(gmax, 0.0) << what << ": zero gradient, the check would be vacuous";
    int bad = 0;
    const size_t stride = std::max<size_t>(1, ana.size() / 40);  // about 40 entries per tensor
    for (size_t i = 0; i < ana.size(); i += stride) {
      const double lp = perturb(i, h), lm = perturb(i, -h);
      const double num = (lp - lm) / (2 * h);
      // Float backward: BatchNorm's backward subtracts two means from dy (cancellation up to the gradient's size),
      // so the error bound scales with the largest gradient: 1e-3 relative plus 1e-4 of the tensor's maximum.
      if (std::fabs(ana[i] - num) > 1e-3 * std::fabs(num) + 1e-4 * gmax && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: analytic " << ana[i] << " numeric " << num;
    }
    EXPECT_EQ(bad, 0) << what;
  };
  compare("dx", std::vector<float>(dx, dx + x.size()), [&](size_t i, double d) {
    Vec xv = xd;
    xv[i] += d;
    return loss(xv, pd);
  });
  for (size_t l = 0; l < hb.layers.size(); ++l)
    compare(hb.names[l], hb.g[l], [&](size_t i, double d) {
      std::vector<Vec> pv = pd;
      pv[l][i] += d;
      return loss(xd, pv);
    });
}

}  // namespace

TEST(ResNetBlocks, BottleneckWithStrideAndDownsample) { block_case({true, 2, 8, 4, 2, 6}); }
TEST(ResNetBlocks, BottleneckChannelDownsampleStride1) { block_case({true, 2, 4, 4, 1, 5}); }  // layer1.0
TEST(ResNetBlocks, BottleneckIdentity) { block_case({true, 3, 16, 4, 1, 4}); }
TEST(ResNetBlocks, BasicWithStrideAndDownsample) { block_case({false, 2, 4, 8, 2, 7}); }
TEST(ResNetBlocks, BasicIdentity) { block_case({false, 3, 6, 6, 1, 4}); }

// The block's layer names are torchvision's, in its registration order.
TEST(ResNetBlocks, LayerNamesInTorchOrder) {
  HostBlock b({true, 1, 8, 4, 2, 4});
  EXPECT_EQ(b.names, (std::vector<std::string>{"conv1", "bn1", "conv2", "bn2", "conv3", "bn3", "downsample.0",
                                               "downsample.1"}));
  HostBlock a({false, 1, 8, 8, 1, 4});
  EXPECT_EQ(a.names, (std::vector<std::string>{"conv1", "bn1", "conv2", "bn2"}));
}
