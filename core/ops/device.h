// The kernel table a model and its optimizer run on: allocation, copies and every op of ops.h behind one
// interface, so each architecture is written once. host_device() forwards to dd::ops (this library); the CUDA
// entry set, cuops::device() (core/ops/cuda/device_cuda.h), forwards to dd::cuops. Pointers given to a
// Device's kernels are that device's memory. One virtual call per kernel launch: nothing is copied or
// allocated in steady state (DeviceArray grows only).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace dd::ops {

// A convolution with its per-shape cached state (oneDNN primitives or cuDNN descriptors and workspace).
class ConvOp {
 public:
  virtual ~ConvOp() = default;
  // x[N,C,H,W] -> y[N,OC,Ho,Wo]; w[OC,C,k,k]
  virtual void forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W) = 0;
  // dx may be null (first layer). dw accumulated.
  virtual void backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N,
                        int64_t H, int64_t W) = 0;
};

// Adapts a kernel library's Conv2d (ops::Conv2d, cuops::Conv2d: one constructor and forward/backward) to ConvOp.
template <class Conv2d>
class ConvAdapter final : public ConvOp {
 public:
  ConvAdapter(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) : op_(C, OC, k, stride, pad) {}
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

// Semantics of every kernel as in ops.h (parameter gradients accumulated, dx overwritten, null dx = not needed).
class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;  // "cpu" | "cuda"
  virtual bool is_host() const = 0;

  // ---- Memory ----
  virtual void* allocate(size_t bytes) = 0;  // zero-filled, 64-byte aligned
  virtual void deallocate(void* p) = 0;
  virtual void fill_zero(float* p, int64_t n) = 0;
  // Host <-> this device, and within this device. Synchronizing: on return the destination holds the data.
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // ---- Dense ----
  // relu = true: y = max(y, 0) (fused into the GEMM on the host; a second kernel on CUDA).
  virtual void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t in,
                              int64_t out, bool relu = false) = 0;
  virtual void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                               int64_t N, int64_t in, int64_t out) = 0;
  virtual std::unique_ptr<ConvOp> make_conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) = 0;

  // ---- Elementwise ----
  virtual void relu_forward(float* y, const float* x, int64_t n) = 0;
  virtual void relu_backward(float* dx, const float* dy, const float* y, int64_t n) = 0;
  virtual void gelu_forward(float* y, const float* x, int64_t n) = 0;
  virtual void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) = 0;
  virtual void add(float* y, const float* a, const float* b, int64_t n) = 0;
  virtual void add_inplace(float* y, const float* a, int64_t n) = 0;

  // ---- Normalization, pooling, embedding, attention, loss ----
  virtual void batchnorm_forward_train(float* y, float* save_mean, float* save_invstd, float* running_mean,
                                       float* running_var, const float* x, const float* gamma, const float* beta,
                                       int64_t N, int64_t C, int64_t HW, float momentum = 0.1f,
                                       float eps = 1e-5f) = 0;
  virtual void batchnorm_forward_eval(float* y, const float* x, const float* gamma, const float* beta,
                                      const float* running_mean, const float* running_var, int64_t N, int64_t C,
                                      int64_t HW, float eps = 1e-5f) = 0;
  virtual void batchnorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                  const float* gamma, const float* save_mean, const float* save_invstd, int64_t N,
                                  int64_t C, int64_t HW) = 0;
  virtual void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w,
                                 const float* b, int64_t N, int64_t C, float eps = 1e-5f) = 0;
  virtual void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                                  const float* w, const float* mean, const float* rstd, int64_t N, int64_t C) = 0;
  virtual void maxpool2_forward(float* y, uint8_t* idx, const float* x, int64_t N, int64_t C, int64_t H,
                                int64_t W) = 0;
  virtual void maxpool2_backward(float* dx, const float* dy, const uint8_t* idx, int64_t N, int64_t C, int64_t H,
                                 int64_t W) = 0;
  virtual void avgpool_global_forward(float* y, const float* x, int64_t N, int64_t C, int64_t HW) = 0;
  virtual void avgpool_global_backward(float* dx, const float* dy, int64_t N, int64_t C, int64_t HW) = 0;
  virtual void maxpool_forward(float* y, int32_t* idx, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                               int64_t k, int64_t s, int64_t p) = 0;
  virtual void maxpool_backward(float* dx, const float* dy, const int32_t* idx, int64_t N, int64_t C, int64_t H,
                                int64_t W, int64_t k, int64_t s, int64_t p) = 0;
  virtual void embedding_forward(float* y, const int32_t* idx, const float* W, int64_t N, int64_t C) = 0;
  virtual void embedding_backward(float* dW, const float* dy, const int32_t* idx, int64_t N, int64_t C) = 0;
  virtual void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                                 int64_t NH) = 0;
  virtual int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t NH) = 0;
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                  const float* att, int64_t B, int64_t T, int64_t C, int64_t NH) = 0;
  // Returns the mean loss to the host; `correct` is a HOST pointer (may be null).
  virtual float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N,
                                     int64_t V, int64_t* correct = nullptr) = 0;
  virtual void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N,
                                     int64_t V, float scale) = 0;

  // ---- Optimizer updates (core/optim semantics); both zero g ----
  // SGD with weight decay and optional (Nesterov) momentum; buf unused when momentum == 0.
  virtual void sgd_update(float* p, float* g, float* buf, int64_t n, float lr, float momentum, float wd,
                          bool nesterov) = 0;
  // AdamW with decoupled weight decay; step is the 1-based update count of this slice (bias correction,
  // computed on the host in double by both entry sets).
  virtual void adamw_update(float* p, float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
                            float eps, float wd, int64_t step) = 0;

  // ---- Llama decoder kernels (RMSNorm, RoPE, SwiGLU; ops.h) ----
  virtual void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                               float eps = 1e-5f) = 0;
  virtual void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                const float* rstd, int64_t N, int64_t C) = 0;
  virtual void rope_forward(float* x, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld,
                            float base = 10000.f) = 0;
  virtual void rope_backward(float* dx, int64_t B, int64_t T, int64_t NH, int64_t hd, int64_t ld,
                             float base = 10000.f) = 0;
  virtual void swiglu_forward(float* y, const float* gu, int64_t N, int64_t F) = 0;
  virtual void swiglu_backward(float* dgu, const float* dy, const float* gu, int64_t N, int64_t F) = 0;

  // ---- Arena kernels (ops.h): the sync engine's, the sensitivity probe's and the anomaly guard's arithmetic on
  // the training state. Only dot3's three sums and all_finite's verdict come back to the host. ----
  virtual bool all_finite(const float* x, int64_t n) = 0;
  virtual void dot3(const float* a, const float* b, int64_t n, double* out) = 0;  // out: HOST pointer, 3 doubles
  virtual void sub(float* y, const float* a, const float* b, int64_t n) = 0;
  virtual void add_diff(float* y, const float* a, const float* b, int64_t n) = 0;
  virtual void outer_nesterov(float* anchor, float* mom, const float* avg, int64_t n, float lr, float mu) = 0;
};

// The CPU entry set (dd::ops).
Device& host_device();

// Copies `bytes` from src (on device `from`) to dst (on device `to`); host<->device or within one device.
void copy_across(Device& to, void* dst, Device& from, const void* src, size_t bytes);

// Storage on one device: the model arenas, optimizer state, activations and saved statistics. resize() zero-fills
// (old contents discarded); ensure() grows only (contents unspecified after a growth), so steady-state steps
// never allocate. operator[] is for host storage only.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(Device& d) : dev_(&d) {}
  DeviceArray(Device& d, size_t n) : dev_(&d) { resize(n); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept { swap(o); return *this; }
  ~DeviceArray() { release(); }

  void resize(size_t n) {
    if (n == n_) { zero(); return; }
    release();
    if (n) p_ = static_cast<T*>(dev_->allocate(n * sizeof(T)));
    n_ = n;
  }
  void ensure(size_t n) { if (n > n_) resize(n); }
  void zero() {
    if (!n_) return;
    if constexpr (std::is_same_v<T, float>) dev_->fill_zero(p_, int64_t(n_));
    else resize_zeroed();
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  Device& device() const { return *dev_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  void resize_zeroed() { size_t n = n_; release(); p_ = static_cast<T*>(dev_->allocate(n * sizeof(T))); n_ = n; }
  void release() {
    if (p_) dev_->deallocate(p_);
    p_ = nullptr;
    n_ = 0;
  }
  void swap(DeviceArray& o) { std::swap(dev_, o.dev_); std::swap(p_, o.p_); std::swap(n_, o.n_); }
  Device* dev_ = &host_device();
  T* p_ = nullptr;
  size_t n_ = 0;
};

using DeviceFloats = DeviceArray<float>;

// Where bytes of device arrays must cross to the host (checkpoints, --save-params, the state a shrink agrees on)
// and back; on the host, plain copies. from_host writes the first n floats of `a`.
inline std::vector<float> to_host(const DeviceFloats& a) {
  std::vector<float> v(a.size());
  if (!v.empty()) a.device().copy_to_host(v.data(), a.data(), sizeof(float) * v.size());
  return v;
}
inline void from_host(DeviceFloats& a, const float* src, size_t n) {
  if (n) a.device().copy_from_host(a.data(), src, sizeof(float) * n);
}

}  // namespace dd::ops
