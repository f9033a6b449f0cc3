// The CPU entry set of the kernel table: every entry forwards to dd::ops; memory is 64-byte aligned host storage.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "core/ops/device.h"
#include "core/ops/ops.h"

namespace dd::ops {
namespace {

class HostConv final : public ConvOp {
 public:
  HostConv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) : op_(C, OC, k, stride, pad) {}
  void forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W) override {
    op_.forward(y, x, w, N, H, W);
  }
  void backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t H,
                int64_t W) override {
    op_.backward(dx, dw, dy, x, w, N, H, W);
  }

 private:
  Conv2d op_;
};

class HostDevice final : public Device {
 public:
  const char* name() const override { return "cpu"; }
  bool is_host() const override { return true; }

  void* allocate(size_t bytes) override {
    const size_t rounded = ((bytes + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    return p;
  }
  void deallocate(void* p) override { std::free(p); }
  void fill_zero(float* p, int64_t n) override {
    if (n > 0) std::memset(p, 0, sizeof(float) * size_t(n));
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}

  void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out,
                      bool relu) override {
    ops::linear_forward(y, x, W, b, N, in, out, relu);
  }
  void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                       int64_t in, int64_t out) override {
    ops::linear_backward(dx, dW, db, dy, x, W, N, in, out);
  }
  std::unique_ptr<ConvOp> make_conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) override {
    return std::make_unique<HostConv>(C, OC, k, stride, pad);
  }

  void relu_forward(float* y, const float* x, int64_t n) override { ops::relu_forward(y, x, n); }
  void relu_backward(float* dx, const float* dy, const float* y, int64_t n) override { ops::relu_backward(dx, dy, y, n); }
  void gelu_forward(float* y, const float* x, int64_t n) override { ops::gelu_forward(y, x, n); }
  void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) override { ops::gelu_backward(dx, dy, x, n); }
  void add(float* y, const float* a, const float* b, int64_t n) override { ops::add(y, a, b, n); }
  void add_inplace(float* y, const float* a, int64_t n) override { ops::add_inplace(y, a, n); }

  void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                               const float* x, const float* gamma, const float* beta, int64_t N, int64_t C, int64_t HW,
                               float momentum, float eps) override {
    ops::batchnorm_forward_train(y, save_mean, save_invstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                 momentum, eps);
  }
  void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta,
                              const float* running_mean, const float* running_var, int64_t N, int64_t C, int64_t HW,
                              float eps) override {
    ops::batchnorm_forward_eval(y, x, gamma, beta, running_mean, running_var, N, C, HW, eps);
  }
  void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                          const float* save_mean, const float* save_invstd, int64_t N, int64_t C, int64_t HW) override {
    ops::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, N, C, HW);
  }
  void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                         int64_t C, float eps) override {
    ops::layernorm_forward(y, mean, rstd, x, w, b, N, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    ops::layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
  }
  void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) override {
    ops::maxpool2_forward(y, idx, x, N, C, H, W);
  }
  void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H,
                         int64_t W) override {
    ops::maxpool2_backward(dx, dy, idx, N, C, H, W);
  }
  void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW) override {
    ops::avgpool_global_forward(y, x, N, C, HW);
  }
  void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW) override {
    ops::avgpool_global_backward(dx, dy, N, C, HW);
  }
  void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) override {
    ops::embedding_forward(y, idx, W, N, C);
  }
  void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) override {
    ops::embedding_backward(dW, dy, idx, N, C);
  }
  void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH) override {
    ops::attention_forward(out, att, qkv, B, T, C, NH);
  }
  int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH) override {
    return ops::attention_scratch_floats(B, T, C, NH);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                          int64_t T, int64_t C, int64_t NH) override {
    ops::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  }
  float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                             int64_t* correct) override {
    return ops::softmax_xent_forward(probs, logits, targets, N, V, correct);
  }
  void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                             float scale) override {
    ops::softmax_xent_backward(dlogits, probs, targets, N, V, scale);
  }

  void sgd_update(float* p, float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                  bool nesterov) override {
    ops::sgd_step(p, g, buf, n, lr, momentum, wd, nesterov);
  }
  // The bias corrections folded into step / inv_sqrt_bc2 / decay, in double, as cuops::adamw_update does.
  void adamw_update(float* p, float* g, float* m, float* v, int64_t n, float lr, float b1, float b2, float eps,
                    float wd, int64_t step) override {
    const double t = double(step);
    const float bc1 = float(1.0 - std::pow(double(b1), t)), bc2 = float(1.0 - std::pow(double(b2), t));
    const float stp = lr / bc1, inv_sqrt_bc2 = 1.0f / std::sqrt(bc2), decay = 1.0f - lr * wd;
    ops::adamw_step(p, g, m, v, n, b1, b2, eps, stp, inv_sqrt_bc2, decay);
  }
};

}  // namespace

Device& host_device() {
  static HostDevice d;
  return d;
}

void copy_across(Device& to, void* dst, Device& from, const void* src, size_t bytes) {
  if (!bytes) return;
  if (&to == &from) to.copy(dst, src, bytes);
  else if (from.is_host()) to.copy_from_host(dst, src, bytes);
  else if (to.is_host()) from.copy_to_host(dst, src, bytes);
  else throw std::logic_error(std::string("copy_across: no path from ") + from.name() + " to " + to.name());
}

}  // namespace dd::ops
