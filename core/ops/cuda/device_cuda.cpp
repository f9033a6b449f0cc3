// The CUDA entry set of the kernel table: every entry forwards to dd::cuops; memory from cudaMalloc.
#include "core/ops/cuda/device_cuda.h"

#include <cuda_runtime.h>

#include "core/ops/cuda/ops_cuda.h"

namespace dd::cuops {
namespace {

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
  std::unique_ptr<ops::ConvOp> make_conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) override {
    return std::make_unique<ops::ConvAdapter<Conv2d>>(C, OC, k, stride, pad);
  }

#define DD_KERNELS cuops
#include "core/ops/device_entries.inc"
#undef DD_KERNELS

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
