// The CUDA entry set of the kernel table: every entry forwards to dd::cuops; memory from cudaMalloc.
#include "core/ops/cuda/device_cuda.h"

#include <cuda_runtime.h>

#include "core/ops/cuda/ops_cuda.h"

namespace dd::cuops {
namespace {

class CudaConv final : public ops::ConvOp {
 public:
  CudaConv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) : op_(C, OC, k, stride, pad) {}
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

class CudaDevice final : public ops::Device {
 public:
  const char* name() const override { return "cuda"; }
  bool is_host() const override { return false; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (!bytes) return nullptr;
    DD_CUDA_CHECK(cudaMalloc(&p, bytes));
    DD_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
    return p;
  }
  void deallocate(void* p) override { cudaFree(p); }
  void fill_zero(float* p, int64_t n) override { cuops::fill_zero(p, n); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { xfer(dst, src, bytes, cudaMemcpyHostToDevice); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { xfer(dst, src, bytes, cudaMemcpyDeviceToHost); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) DD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  void synchronize() override { DD_CUDA_CHECK(cudaStreamSynchronize(stream())); }

  void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out,
                      bool relu) override {
    cuops::linear_forward(y, x, W, b, N, in, out);
    if (relu) cuops::relu_forward(y, y, N * out);
  }
  void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                       int64_t in, int64_t out) override {
    cuops::linear_backward(dx, dW, db, dy, x, W, N, in, out);
  }
  std::unique_ptr<ops::ConvOp> make_conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) override {
    return std::make_unique<CudaConv>(C, OC, k, stride, pad);
  }

  void relu_forward(float* y, const float* x, int64_t n) override { cuops::relu_forward(y, x, n); }
  void relu_backward(float* dx, const float* dy, const float* y, int64_t n) override { cuops::relu_backward(dx, dy, y, n); }
  void gelu_forward(float* y, const float* x, int64_t n) override { cuops::gelu_forward(y, x, n); }
  void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) override { cuops::gelu_backward(dx, dy, x, n); }
  void add(float* y, const float* a, const float* b, int64_t n) override { cuops::add(y, a, b, n); }
  void add_inplace(float* y, const float* a, int64_t n) override { cuops::add_inplace(y, a, n); }

  void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                               const float* x, const float* gamma, const float* beta, int64_t N, int64_t C, int64_t HW,
                               float momentum, float eps) override {
    cuops::batchnorm_forward_train(y, save_mean, save_invstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                   momentum, eps);
  }
  void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta,
                              const float* running_mean, const float* running_var, int64_t N, int64_t C, int64_t HW,
                              float eps) override {
    cuops::batchnorm_forward_eval(y, x, gamma, beta, running_mean, running_var, N, C, HW, eps);
  }
  void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                          const float* save_mean, const float* save_invstd, int64_t N, int64_t C, int64_t HW) override {
    cuops::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, N, C, HW);
  }
  void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                         int64_t C, float eps) override {
    cuops::layernorm_forward(y, mean, rstd, x, w, b, N, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    cuops::layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
  }
  void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) override {
    cuops::maxpool2_forward(y, idx, x, N, C, H, W);
  }
  void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H,
                         int64_t W) override {
    cuops::maxpool2_backward(dx, dy, idx, N, C, H, W);
  }
  void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW) override {
    cuops::avgpool_global_forward(y, x, N, C, HW);
  }
  void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW) override {
    cuops::avgpool_global_backward(dx, dy, N, C, HW);
  }
  void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) override {
    cuops::embedding_forward(y, idx, W, N, C);
  }
  void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) override {
    cuops::embedding_backward(dW, dy, idx, N, C);
  }
  void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH) override {
    cuops::attention_forward(out, att, qkv, B, T, C, NH);
  }
  int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH) override {
    return cuops::attention_scratch_floats(B, T, C, NH);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                          int64_t T, int64_t C, int64_t NH) override {
    cuops::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  }
  float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                             int64_t* correct) override {
    return cuops::softmax_xent_forward(probs, logits, targets, N, V, correct);
  }
  void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                             float scale) override {
    cuops::softmax_xent_backward(dlogits, probs, targets, N, V, scale);
  }

  // cuops takes (momentum, nesterov, wd); the table's order is ops::sgd_step's (momentum, wd, nesterov).
  void sgd_update(float* p, float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                  bool nesterov) override {
    cuops::sgd_update(p, g, buf, n, lr, momentum, nesterov, wd);
  }
  void adamw_update(float* p, float* g, float* m, float* v, int64_t n, float lr, float b1, float b2, float eps,
                    float wd, int64_t step) override {
    cuops::adamw_update(p, g, m, v, n, lr, b1, b2, eps, wd, step);
  }

 private:
  static void xfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    DD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
    DD_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
};

}  // namespace

ops::Device& device() {
  static CudaDevice d;
  return d;
}

}  // namespace dd::cuops
