// CPU kernels, forward and backward side by side (llm.c style): raw float pointers, row-major, NCHW images.
// Conventions: parameter gradients (dW, db, dgamma, ...) are ACCUMULATED (+=), the grad arena is zeroed by
// the model before backward. Input gradients (dx) are OVERWRITTEN; a null dx means "not needed".
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/fp_mode.h"
#include "base/precision.h"

namespace dd::ops {

// Compute threads for oneDNN/OpenMP on this rank; applies the process's subnormal mode to them.
void set_threads(int n);
int threads();
// Sets the process's subnormal mode (base/fp_mode.h) and applies it to the calling thread and the OpenMP
// workers (oneDNN's). Threads started later apply it themselves.
void set_subnormals(Subnormals s);
// Sets the process's compute precision (base/precision.h) for GEMMs and convolutions built from now on (the caches
// key on it). bf16 needs bf16_supported(); set_precision refuses it otherwise (UsageError).
void set_precision(Precision p);
Precision precision();
// True when oneDNN may use bf16 instructions on this CPU (avx512_bf16 or AMX): its effective ISA, which
// ONEDNN_MAX_CPU_ISA lowers (ONEDNN_MAX_CPU_ISA=AVX512_CORE stands for a CPU without them).
bool bf16_supported();
// Why --precision bf16 cannot run here ("" when it can): a CPU without bf16 instructions.
std::string bf16_refusal();

// Row-major C = alpha * op(A) @ op(B) + beta * C, op = transpose if ta/tb. A is MxK (after op), B is KxN.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// gemm with an epilogue: C = op(A) @ op(B) + bias[N] (broadcast over rows, may be null) + beta * C, then ReLU
// when relu. A bias needs alpha == 1. Both go through one cached oneDNN matmul primitive per shape.
void matmul(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
            const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias, bool relu);

// ---- Linear: y[N,out] = x[N,in] @ W[out,in]^T + b[out] (b may be null) ----
// relu = true fuses y = max(y, 0) into the GEMM (one pass instead of two).
void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in, int64_t out,
                    bool relu = false);
void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                     int64_t in, int64_t out);

// ---- Elementwise ----
void relu_forward(float* y, const float* x, int64_t n);
void relu_backward(float* dx, const float* dy, const float* y, int64_t n);  // dx may alias dy
// Exact (erf) GELU, as PyTorch's F.gelu default.
void gelu_forward(float* y, const float* x, int64_t n);
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);  // dx may alias dy
void add(float* y, const float* a, const float* b, int64_t n);              // y = a + b (y may alias)
void add_inplace(float* y, const float* a, int64_t n);                      // y += a

// ---- Conv2d, no bias, square kernel; oneDNN primitives cached per shape inside the object ----
class Conv2d {
 public:
  Conv2d(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad);
  ~Conv2d();
  // x[N,C,H,W] -> y[N,OC,Ho,Wo]; w[OC,C,k,k]
  void forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W);
  // dx may be null (first layer). dw accumulated.
  void backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t H,
                int64_t W);
  int64_t out_h(int64_t H) const { return (H + 2 * pad_ - k_) / stride_ + 1; }
  int64_t out_w(int64_t W) const { return (W + 2 * pad_ - k_) / stride_ + 1; }

 private:
  int64_t C_, OC_, k_, stride_, pad_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- BatchNorm2d over x[N,C,HW] (also BatchNorm1d with HW=1) ----
// Training: batch statistics; saves mean and inverse std [C] for backward; updates running stats
// (momentum 0.1, unbiased variance for running_var, as PyTorch). Eval: uses running stats.
void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean,
                             float* running_var, const float* x, const float* gamma, const float* beta, int64_t N,
                             int64_t C, int64_t HW, float momentum = 0.1f, float eps = 1e-5f);
void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, int64_t N, int64_t C, int64_t HW,
                            float eps = 1e-5f);
void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* save_mean, const float* save_invstd, int64_t N, int64_t C,
                        int64_t HW);

// ---- Pooling ----
// 2x2 stride-2 max pool: x[N,C,H,W] -> y[N,C,H/2,W/2]; idx stores the argmax (0..3) per output.
void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W);
void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H, int64_t W);
// Global average pool: x[N,C,HW] -> y[N,C]
void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW);
void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW);
// k x k max pool with stride s and padding p (ResNet's stem: 3, 2, 1): x[N,C,H,W] -> y[N,C,Ho,Wo], Ho =
// (H + 2p - k) / s + 1 (floor, as PyTorch without ceil_mode). Padding never wins (windows are clipped to the
// input); the first maximum in row-major window order wins ties and a NaN wins, as in PyTorch. idx stores the
// argmax as a flat index h*W + w into its input plane. Needs k >= 1, s >= 1, 0 <= p <= k/2 (PyTorch's range).
void maxpool_forward(float* y, int32_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t k,
                     int64_t s, int64_t p);
// dx overwritten: each input position receives the sum of dy over the windows whose argmax it is.
void maxpool_backward(float* dx, const float* dy, const int32_t* idx, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t k, int64_t s, int64_t p);
inline int64_t maxpool_out(int64_t H, int64_t k, int64_t s, int64_t p) { return (H + 2 * p - k) / s + 1; }

// ---- LayerNorm over the last dim: x[N,C]; saves mean and rstd [N] ----
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t N, int64_t C, float eps = 1e-5f);
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int64_t N, int64_t C);

// ---- Embedding: y[N,C] = W[idx[n], :] ----
void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C);
void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C);

// ---- Causal multi-head self-attention ----
// qkv[B,T,3C] (q | k | v, each C = NH*hd, head h uses columns h*hd..), out[B,T,C] (heads concatenated).
// att[B,NH,T,T] saves the softmax probabilities for backward. Scale 1/sqrt(hd).
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);
// dqkv overwritten. scratch must hold at least attention_scratch_floats(B,T,C,NH) floats.
int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t C, int64_t NH);

// ---- Softmax cross-entropy, mean over N rows: logits[N,V], targets[N] ----
// Returns mean loss; probs[N,V] saved for backward. `correct` (optional) counts argmax == target.
float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                           int64_t* correct = nullptr);
// dlogits = (probs - onehot(target)) * scale, with scale = 1/N for the mean loss.
void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                           float scale);

// ---- Optimizer updates (core/optim semantics), one fused pass; g is zeroed in the same pass ----
// SGD: d = g + wd*p; buf = mu*buf + d; p -= lr*buf (nesterov: p -= lr*(d + mu*buf)); mu == 0: p -= lr*d, buf unused.
void sgd_step(float* p, float* g, float* buf, int64_t n, float lr, float mu, float wd, bool nesterov);
// AdamW: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; p = p*decay - step*m / (sqrt(v)*inv_sqrt_bc2 + eps).
void adamw_step(float* p, float* g, float* m, float* v, int64_t n, float b1, float b2, float eps, float step,
                float inv_sqrt_bc2, float decay);
// True when every p[i] is finite: an integer OR over the exponent bits, so it vectorizes (a float sum of
// p[i] - p[i] does not without -ffast-math and runs as one dependent add per element).
bool all_finite(const float* p, int64_t n);

// ---- Arena kernels: what the sync engine, the sensitivity probe and the anomaly guard compute on the training
// state, so that none of them reads device memory on the host (core/ops/arena.cpp) ----
// out[0..2] = (sum a*a, sum b*b, sum a*b), each accumulated in double; out is a HOST pointer (the three sums are
// all that crosses from a device). The host sums in index order, one pass.
void dot3(const float* a, const float* b, int64_t n, double* out);
void sub(float* y, const float* a, const float* b, int64_t n);       // y = a - b (y may alias a or b)
void add_diff(float* y, const float* a, const float* b, int64_t n);  // y += a - b, in float as written
// The outer optimizer's Nesterov step on an anchor (core/sync/merge/param_merge.h): per element
// g = anchor - avg; mom = mu * mom + g; anchor -= lr * (g + mu * mom).
void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu);

// ---- Llama decoder kernels (docs/models.md) ----
// RMSNorm over the last dim of x[N,C]: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps), weight only; saves
// rstd [N] for backward. dw accumulated, dx overwritten (may be null).
void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps = 1e-5f);
void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C);
// Rotary position embedding, IN PLACE on rows x[b*T + t] (row stride ld floats) of B sequences of T tokens: the
// first NH*hd columns of a row are NH heads of hd (even) columns; in each head the pair (2i, 2i+1) is rotated by
// the angle t * base^(-2i/hd). Backward rotates the gradient back (by minus the angle), also in place.
void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base = 10000.f);
void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld, float base = 10000.f);
// SwiGLU: each row of gu[N, 2F] is gate | up; y[N,F] = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
// dgu[N, 2F] overwritten (d gate | d up); it may alias gu.
void swiglu_forward(float* y, const float* gu, int64_t N, int64_t F);
void swiglu_backward(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F);

}  // namespace dd::ops
