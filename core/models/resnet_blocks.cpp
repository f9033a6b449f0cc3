// Basic and bottleneck residual blocks, forward and backward written out over the kernel table.
#include "core/models/resnet_blocks.h"

#include <algorithm>
#include <cmath>

namespace dd::models {

void KaimingConv::init(Rng& rng) {
  const float sd = std::sqrt(2.0f / float(OC * k * k));
  float* w = params();
  for (int64_t i = 0, n = OC * C * k * k; i < n; ++i) w[i] = sd * rng.normal();
}

namespace {
void tell(nn::BackwardHook* h, const nn::Layer* l) {
  if (h) h->on_layer_ready(l->index());
}
template <class L>
L* reg(const ResBlock::AddLayer& add, const std::string& name, std::unique_ptr<L> l) {
  L* raw = l.get();
  add(name, std::move(l));
  return raw;
}
}  // namespace

ResBlock::ResBlock(ops::Device& dev, bool bneck, int64_t C_, int64_t width_, int64_t stride_, int64_t H_,
                   int64_t W_, const AddLayer& add)
    : C(C_), OC(width_ * (bneck ? 4 : 1)), width(width_), stride(stride_), H(H_), W(W_), bottleneck(bneck),
      dev_(dev), c1_(dev), r1_(dev), c2_(dev), r2_(dev), c3_(dev), sc_(dev), out_(dev) {
  if (bottleneck) {
    conv1 = reg(add, "conv1", std::make_unique<KaimingConv>(C, width, 1, 1, 0));
    bn1 = reg(add, "bn1", std::make_unique<nn::BatchNorm>(width));
    conv2 = reg(add, "conv2", std::make_unique<KaimingConv>(width, width, 3, stride, 1));
    bn2 = reg(add, "bn2", std::make_unique<nn::BatchNorm>(width));
    conv3 = reg(add, "conv3", std::make_unique<KaimingConv>(width, OC, 1, 1, 0));
    bn3 = reg(add, "bn3", std::make_unique<nn::BatchNorm>(OC));
    Ho = conv2->out_h(H), Wo = conv2->out_w(W);
  } else {
    conv1 = reg(add, "conv1", std::make_unique<KaimingConv>(C, width, 3, stride, 1));
    bn1 = reg(add, "bn1", std::make_unique<nn::BatchNorm>(width));
    conv2 = reg(add, "conv2", std::make_unique<KaimingConv>(width, width, 3, 1, 1));
    bn2 = reg(add, "bn2", std::make_unique<nn::BatchNorm>(width));
    Ho = conv1->out_h(H), Wo = conv1->out_w(W);
  }
  if (stride != 1 || C != OC) {
    dsconv = reg(add, "downsample.0", std::make_unique<KaimingConv>(C, OC, 1, stride, 0));
    dsbn = reg(add, "downsample.1", std::make_unique<nn::BatchNorm>(OC));
  }
}

const float* ResBlock::forward(const float* x, int64_t N, bool train, BlockScratch& s) {
  x_ = x;
  const int64_t hw = Ho * Wo, n_out = N * OC * hw;
  out_.ensure(size_t(n_out));
  // The 3x3 conv's input resolution: the block's for a basic block, the 1x1's output for a bottleneck (same H).
  const int64_t n1 = N * width * (bottleneck ? H * W : hw), hw1 = bottleneck ? H * W : hw;
  c1_.ensure(size_t(n1));
  r1_.ensure(size_t(n1));
  conv1->forward(c1_.data(), x, N, H, W);
  bn1->forward(r1_.data(), c1_.data(), N, hw1, train);
  dev_.relu_forward(r1_.data(), r1_.data(), n1);
  if (bottleneck) {
    const int64_t n2 = N * width * hw;
    c2_.ensure(size_t(n2));
    r2_.ensure(size_t(n2));
    conv2->forward(c2_.data(), r1_.data(), N, H, W);
    bn2->forward(r2_.data(), c2_.data(), N, hw, train);
    dev_.relu_forward(r2_.data(), r2_.data(), n2);
    c3_.ensure(size_t(n_out));
    conv3->forward(c3_.data(), r2_.data(), N, Ho, Wo);
    bn3->forward(out_.data(), c3_.data(), N, hw, train);
  } else {
    c2_.ensure(size_t(n_out));
    conv2->forward(c2_.data(), r1_.data(), N, Ho, Wo);
    bn2->forward(out_.data(), c2_.data(), N, hw, train);
  }
  if (dsconv) {
    sc_.ensure(size_t(n_out));
    s.tmp.ensure(size_t(n_out));
    dsconv->forward(sc_.data(), x, N, H, W);
    dsbn->forward(s.tmp.data(), sc_.data(), N, hw, train);
    dev_.add_inplace(out_.data(), s.tmp.data(), n_out);
  } else {
    dev_.add_inplace(out_.data(), x, n_out);
  }
  dev_.relu_forward(out_.data(), out_.data(), n_out);
  return out_.data();
}

float* ResBlock::backward(float* dy, int64_t N, nn::BackwardHook* hook, BlockScratch& s) {
  const int64_t hw = Ho * Wo, n_out = N * OC * hw, n_in = N * C * H * W;
  const int64_t n_mid_in = N * width * H * W, n_mid = N * width * hw;  // width channels before/after the stride
  // Sized once up front: ensure() may reallocate, which must not happen while a buffer holds live data.
  s.t1.ensure(size_t(std::max({n_out, n_mid_in, n_mid})));
  s.t2.ensure(size_t(std::max(n_mid_in, n_mid)));
  Arena& dxa = s.dx[0].data() == dy ? s.dx[1] : s.dx[0];
  dxa.ensure(size_t(n_in));
  float* dx = dxa.data();
  float* t1 = s.t1.data();
  float* t2 = s.t2.data();

  dev_.relu_backward(dy, dy, out_.data(), n_out);  // dy is now the gradient of the sum
  if (dsconv) {
    s.dxs.ensure(size_t(n_in));
    dsbn->backward(t1, dy, sc_.data(), N, hw);
    tell(hook, dsbn);
    dsconv->backward(s.dxs.data(), t1, x_, N, H, W);
    tell(hook, dsconv);
  }
  if (bottleneck) {
    bn3->backward(t1, dy, c3_.data(), N, hw);
    tell(hook, bn3);
    conv3->backward(t2, t1, r2_.data(), N, Ho, Wo);
    tell(hook, conv3);
    dev_.relu_backward(t2, t2, r2_.data(), n_mid);
    bn2->backward(t1, t2, c2_.data(), N, hw);
    tell(hook, bn2);
    conv2->backward(t2, t1, r1_.data(), N, H, W);
    tell(hook, conv2);
    dev_.relu_backward(t2, t2, r1_.data(), n_mid_in);
    bn1->backward(t1, t2, c1_.data(), N, H * W);
  } else {
    bn2->backward(t1, dy, c2_.data(), N, hw);
    tell(hook, bn2);
    conv2->backward(t2, t1, r1_.data(), N, Ho, Wo);
    tell(hook, conv2);
    dev_.relu_backward(t2, t2, r1_.data(), n_mid);
    bn1->backward(t1, t2, c1_.data(), N, hw);
  }
  tell(hook, bn1);
  conv1->backward(dx, t1, x_, N, H, W);
  tell(hook, conv1);
  dev_.add_inplace(dx, dsconv ? s.dxs.data() : dy, n_in);
  return dx;
}

}  // namespace dd::models
