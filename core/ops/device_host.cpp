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
  std::unique_ptr<ConvOp> make_conv(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad) override {
    return std::make_unique<ConvAdapter<Conv2d>>(C, OC, k, stride, pad);
  }

#define DD_KERNELS ops
#include "core/ops/device_entries.inc"
#undef DD_KERNELS

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
