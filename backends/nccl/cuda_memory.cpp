// Device-memory helpers behind nccl_backend.h, so CLI code needs no CUDA headers.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backends/nccl/nccl_backend.h"

namespace dd {
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}
}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

float* cuda_alloc_floats(size_t n) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)), "cudaMalloc");
  return static_cast<float*>(p);
}

void cuda_free(float* p) { cudaFree(p); }

void cuda_copy_to_device(float* dst, const float* src, size_t n) {
  check(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
}

void cuda_copy_to_host(float* dst, const float* src, size_t n) {
  check(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost), "copy to host");
}

}  // namespace dd
