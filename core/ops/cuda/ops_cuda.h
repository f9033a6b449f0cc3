// CUDA kernels with the same functions, signatures and semantics as core/ops/ops.h, on DEVICE pointers.
// Conventions (as the CPU ops): parameter gradients (dW, db, dgamma, ...) are ACCUMULATED (+=); input
// gradients (dx) are OVERWRITTEN; a null dx means "not needed". Row-major, NCHW images.
// Every kernel and library call is issued asynchronously on stream() (set_stream); only softmax_xent_forward,
// dot3 and all_finite synchronize (they return results to the host). cuBLAS runs in plain FP32 (no TF32) and
// cuDNN convolutions in FMA math, so results match the CPU path to float tolerance.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "core/ops/cuda/cuda_check.h"

namespace dd::cuops {

// ---- Stream and library handles ----
// One process-wide compute stream (default: the legacy default stream, nullptr). cuBLAS/cuDNN handles are
// per thread (they are not thread-safe) and are re-pointed at stream() before every call.
void set_stream(cudaStream_t s);
cudaStream_t stream();

// Row-major C = alpha * op(A) @ op(B) + beta * C, op = transpose if ta/tb. A is MxK (after op), B is KxN.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc);
// The same, `batch` times, matrix i at A + i*sA, B + i*sB, C + i*sC.
void gemm_strided_batched(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                          int64_t sA, const float* B, int64_t ldb, int64_t sB, float beta, float* C, int64_t ldc,
                          int64_t sC, int64_t batch);

// ---- Linear: y[N,out] = x[N,in] @ W[out,in]^T + b[out] (b may be null) ----
void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out);
void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                     int64_t in, int64_t out);

// ---- Elementwise ----
void relu_forward(float* y, const float* x, int64_t n);
void relu_backward(float* dx, const float* dy, const float* y, int64_t n);  // dx may alias dy
void gelu_forward(float* y, const float* x, int64_t n);                     // exact (erf) GELU
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);  // dx may alias dy
void add(float* y, const float* a, const float* b, int64_t n);              // y = a + b (y may alias)
void add_inplace(float* y, const float* a, int64_t n);                      // y += a
void scale_inplace(float* x, float s, int64_t n);                           // x *= s
void fill_zero(float* x, int64_t n);                                        // x = 0 (async memset)

// ---- Conv2d, no bias, square kernel, cross-correlation (as PyTorch); cuDNN descriptors, algorithms and
// workspace cached per input shape inside the object ----
class Conv2d {
 public:
  Conv2d(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad);
  ~Conv2d();
  Conv2d(const Conv2d&) = delete;
  Conv2d& operator=(const Conv2d&) = delete;
  // x[N,C,H,W] -> y[N,OC,Ho,Wo]; w[OC,C,k,k]
  void forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W);
  // dx may be null (first layer). dw accumulated.
  void backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t H, int64_t W);
  int64_t out_h(int64_t H) const { return (H + 2 * pad_ - k_) / stride_ + 1; }
  int64_t out_w(int64_t W) const { return (W + 2 * pad_ - k_) / stride_ + 1; }

 private:
  int64_t C_, OC_, k_, stride_, pad_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- BatchNorm2d over x[N,C,HW] (also BatchNorm1d with HW=1); gamma/beta may be null (1 and 0) ----
// Training: batch statistics; saves mean and inverse std [C]; updates running stats (momentum 0.1, unbiased
// running variance, as PyTorch); save_* and running_* may be null. Eval: uses running stats.
void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             const float* x, const float* gamma, const float* beta, int64_t N, int64_t C, int64_t HW,
                             float momentum = 0.1f, float eps = 1e-5f);
void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta, const float* running_mean,
                            const float* running_var, int64_t N, int64_t C, int64_t HW, float eps = 1e-5f);
void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                        const float* save_mean, const float* save_invstd, int64_t N, int64_t C, int64_t HW);

// ---- Pooling ----
// 2x2 stride-2 max pool: x[N,C,H,W] -> y[N,C,H/2,W/2]; idx stores the argmax (0..3, window order 0 1 / 2 3,
// first maximum wins ties) per output.
void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W);
void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H, int64_t W);
// Global average pool: x[N,C,HW] -> y[N,C]
void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW);
void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW);
// k x k / stride s / padding p max pool, as dd::ops::maxpool_forward (padding never wins, first maximum in
// row-major window order wins ties, NaN wins; idx = flat argmax h*W + w in the input plane).
void maxpool_forward(float* y, int32_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k,
                     int64_t s, int64_t p);
// dx overwritten with the sum of dy over the windows whose argmax each input is (a gather per input element:
// deterministic, no atomics).
void maxpool_backward(float* dx, const float* dy, const int32_t* idx, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t k, int64_t s, int64_t p);

// ---- LayerNorm over the last dim: x[N,C]; saves mean and rstd [N] ----
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                       int64_t C, float eps = 1e-5f);
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C);

// ---- Embedding: y[N,C] = W[idx[n], :] ----
// Indices are NOT validated on the device (that would need a sync); the data layer guarantees the range.
void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C);
void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C);  // atomicAdd

// ---- Causal multi-head self-attention (same layout and scratch contract as dd::ops) ----
// qkv[B,T,3C] (q | k | v, each C = NH*hd, head h uses columns h*hd..), out[B,T,C] (heads concatenated).
// att[B,NH,T,T] saves the softmax probabilities (zeros above the diagonal). Scale 1/sqrt(hd).
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);
// dqkv overwritten. scratch (device) must hold at least attention_scratch_floats(B,T,C,NH) floats.
int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH);

// ---- Softmax cross-entropy, mean over N rows: logits[N,V], targets[N] (device) ----
// Returns mean loss; probs[N,V] saved for backward. `correct` (optional, HOST pointer) counts argmax == target.
// This is the one synchronizing op: it copies a 16-byte result (loss, hit count, first bad target row) to the
// host and waits for stream(). Throws dd::UsageError when a target lies outside [0, V).
float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                           int64_t* correct = nullptr);
// dlogits = (probs - onehot(target)) * scale, with scale = 1/N for the mean loss.
void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                           float scale);

// ---- Optimizers (core/optim/optimizer.cpp semantics, element for element); both zero g afterwards ----
// SGD with weight decay, optional (Nesterov) momentum; mom [n] is the momentum buffer (unused when momentum=0).
void sgd_update(float* p, float* g, float* mom, int64_t n, float lr, float momentum, bool nesterov, float wd);
// AdamW (decoupled weight decay); step is the 1-based update count of this parameter slice (bias correction).
void adamw_update(float* p, float* g, float* m, float* v, int64_t n, float lr, float b1, float b2, float eps, float wd,
                  int64_t step);

// ---- Llama decoder kernels (same semantics as core/ops/ops.h) ----
void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps = 1e-5f);
void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C);
void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base = 10000.f);
void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base = 10000.f);
void swiglu_forward(float* y, const float* gu, int64_t N, int64_t F);
void swiglu_backward(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F);  // dgu may alias gu

// ---- Arena kernels (same semantics as core/ops/ops.h; arena.cu) ----
// True when no x[i] is Inf or NaN. Synchronizes: the verdict is copied to the host.
bool all_finite(const float* x, int64_t n);
// out[0..2] = (sum a*a, sum b*b, sum a*b) in double; out is a HOST pointer. A fixed two-stage reduction (its order
// depends on n only: repeated calls are bitwise equal, not equal to the host's index-order sum). Synchronizes.
void dot3(const float* a, const float* b, int64_t n, double* out);
void sub(float* y, const float* a, const float* b, int64_t n);       // y = a - b (y may alias a or b)
void add_diff(float* y, const float* a, const float* b, int64_t n);  // y += a - b
// g = anchor - avg; mom = mu * mom + g; anchor -= lr * (g + mu * mom), the multiply-adds fused (as the host's).
void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu);

}  // namespace dd::cuops
