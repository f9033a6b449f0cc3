// Layer parameter specs and PyTorch-default initialization (on the host views); BatchNorm/LayerNorm keep their
// saved statistics in device scratch of the model's device.
#include "core/nn/layers.h"

#include <algorithm>
#include <cmath>

namespace dd::nn {

static void uniform_fill(float* p, int64_t n, float bound, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) p[i] = rng.uniform(-bound, bound);
}

std::vector<TensorSpec> Linear::param_specs() const {
  std::vector<TensorSpec> s{{"weight", {out, in}}};
  if (has_bias) s.push_back({"bias", {out}});
  return s;
}

// kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias alike.
void Linear::init(Rng& rng) {
  if (init_std > 0) {
    for (int64_t i = 0; i < in * out; ++i) p_[i] = init_std * rng.normal();
    if (has_bias) std::fill(p_ + in * out, p_ + in * out + out, 0.0f);
    return;
  }
  float bound = 1.0f / std::sqrt(float(in));
  uniform_fill(p_, in * out, bound, rng);
  if (has_bias) uniform_fill(p_ + in * out, out, bound, rng);
}

void Conv::init(Rng& rng) { uniform_fill(p_, OC * C * k * k, 1.0f / std::sqrt(float(C * k * k)), rng); }

void BatchNorm::init(Rng&) {
  for (int64_t c = 0; c < C; ++c) {
    p_[c] = 1.0f;
    p_[C + c] = 0.0f;
    buf_[c] = 0.0f;
    buf_[C + c] = 1.0f;
  }
}

void BatchNorm::forward(float* y, const float* x, int64_t N, int64_t HW, bool train) {
  if (train) {
    save_mean_.ensure(size_t(C));
    save_invstd_.ensure(size_t(C));
    dev_->batchnorm_forward_train(y, save_mean_.data(), save_invstd_.data(), buf_, buf_ + C, x, p_, p_ + C, N, C, HW);
  } else {
    dev_->batchnorm_forward_eval(y, x, p_, p_ + C, buf_, buf_ + C, N, C, HW);
  }
}

void BatchNorm::backward(float* dx, const float* dy, const float* x, int64_t N, int64_t HW) const {
  dev_->batchnorm_backward(dx, g_, g_ + C, dy, x, p_, save_mean_.data(), save_invstd_.data(), N, C, HW);
}

void LayerNorm::init(Rng&) {
  for (int64_t c = 0; c < C; ++c) {
    p_[c] = 1.0f;
    p_[C + c] = 0.0f;
  }
}

void LayerNorm::forward(float* y, const float* x, int64_t N) {
  mean_.ensure(size_t(N));
  rstd_.ensure(size_t(N));
  dev_->layernorm_forward(y, mean_.data(), rstd_.data(), x, p_, p_ + C, N, C);
}

void LayerNorm::backward(float* dx, const float* dy, const float* x, int64_t N) const {
  dev_->layernorm_backward(dx, g_, g_ + C, dy, x, p_, mean_.data(), rstd_.data(), N, C);
}

void Embedding::init(Rng& rng) {
  for (int64_t i = 0; i < V * C; ++i) p_[i] = init_std * rng.normal();
}

void RMSNorm::init(Rng&) {
  for (int64_t c = 0; c < C; ++c) p_[c] = 1.0f;
}

void RMSNorm::forward(float* y, const float* x, int64_t N) {
  rstd_.ensure(size_t(N));
  dev_->rmsnorm_forward(y, rstd_.data(), x, p_, N, C, eps);
}

void RMSNorm::backward(float* dx, const float* dy, const float* x, int64_t N) const {
  dev_->rmsnorm_backward(dx, g_, dy, x, p_, rstd_.data(), N, C);
}

}  // namespace dd::nn
