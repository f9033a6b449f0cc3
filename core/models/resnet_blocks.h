// The residual blocks of torchvision's ResNets (docs/models.md, "ResNet-18 and ResNet-50"): the basic block
// (3x3(stride) -> 3x3) and the bottleneck (1x1 -> 3x3(stride) -> 1x1 with expansion 4), each with a 1x1
// conv + BN downsample where the shape changes, written out forward and backward over the model's kernel table.
// A block registers its layers with its owner in torch's registration order (conv1, bn1, conv2, bn2[, conv3,
// bn3][, downsample.0, downsample.1]), so the owner's layer list is torch's list of parameter-owning modules.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/models/model.h"
#include "core/nn/layers.h"

namespace dd::models {

// torchvision's initialization of its convolutions: kaiming_normal_(mode="fan_out", nonlinearity="relu"),
// i.e. N(0, 2 / (OC * k * k)).
class KaimingConv : public nn::Conv {
 public:
  using nn::Conv::Conv;
  void init(Rng& rng) override;
};

// Scratch shared by every block of one model: forward's downsample output, backward's temporaries and the two
// buffers the input gradients alternate between (a block's dx never aliases the dy it was given).
struct BlockScratch {
  explicit BlockScratch(ops::Device& d) : tmp(d), t1(d), t2(d), dxs(d), dx{Arena(d), Arena(d)} {}
  Arena tmp, t1, t2, dxs;
  Arena dx[2];
};

class ResBlock {
 public:
  // Registers a layer with the owner (name relative to the block) and returns it.
  using AddLayer = std::function<nn::Layer*(const std::string&, std::unique_ptr<nn::Layer>)>;

  // Input C x H x W; `width` is the 3x3 conv's channels; output width * expansion (1 basic, 4 bottleneck) at
  // the stride's resolution. torchvision puts the stride on the 3x3 conv (conv1 of a basic block, conv2 of a
  // bottleneck) and adds the downsample when stride != 1 or C != width * expansion.
  ResBlock(ops::Device& dev, bool bottleneck, int64_t C, int64_t width, int64_t stride, int64_t H, int64_t W,
           const AddLayer& add);

  // x[N, C, H, W] (kept until backward) -> the block's output [N, OC, Ho, Wo] (owned by the block).
  const float* forward(const float* x, int64_t N, bool train, BlockScratch& s);
  // dy: gradient w.r.t. the output of the last training forward; it is overwritten (the ReLU's backward runs in
  // place). Returns the gradient w.r.t. the block input, in one of s.dx (the one not holding dy). Accumulates
  // parameter gradients and tells `hook` after each layer, in strictly decreasing layer index.
  float* backward(float* dy, int64_t N, nn::BackwardHook* hook, BlockScratch& s);

  int64_t C, OC, width, stride, H, W, Ho, Wo;
  bool bottleneck;
  nn::Conv *conv1, *conv2, *conv3 = nullptr, *dsconv = nullptr;
  nn::BatchNorm *bn1, *bn2, *bn3 = nullptr, *dsbn = nullptr;

 private:
  ops::Device& dev_;
  const float* x_ = nullptr;
  // Saved for backward: conv outputs (BatchNorm inputs), post-ReLU activations (conv inputs, ReLU masks).
  Arena c1_, r1_, c2_, r2_, c3_, sc_, out_;
};

}  // namespace dd::models
