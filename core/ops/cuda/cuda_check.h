// Error checking for the CUDA runtime (DD_CUDA_CHECK) and a never-throwing probe for a usable CUDA device.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#define DD_CUDA_CHECK(expr)                                                                               \
  do {                                                                                                    \
    const cudaError_t dd_cuda_err_ = (expr);                                                              \
    if (dd_cuda_err_ != cudaSuccess)                                                                      \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": CUDA error " + \
                               cudaGetErrorName(dd_cuda_err_) + " (" + cudaGetErrorString(dd_cuda_err_) + \
                               ") in " #expr);                                                            \
  } while (0)

namespace dd::cuops {

// True when the runtime loads and reports at least one device. Never throws: any error (no driver, no
// device, a container without GPU access) reads as "no CUDA", so callers can fall back or skip.
bool cuda_available();

}  // namespace dd::cuops
