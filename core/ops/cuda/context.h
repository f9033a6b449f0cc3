// Internal to dd_ops_cuda: per-thread cuBLAS/cuDNN handles bound to the compute stream, their error checks,
// and the launch-geometry helpers shared by the kernel files.
#pragma once
#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "core/ops/cuda/cublas_api.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/ops/cuda/ops_cuda.h"

#define DD_CUBLAS_CHECK(expr)                                                                               \
  do {                                                                                                      \
    const cublasStatus_t dd_cublas_st_ = (expr);                                                            \
    if (dd_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": cuBLAS error " + \
                               dd::cuops::detail::cublas_api().status_string(dd_cublas_st_) + " in " #expr);                        \
  } while (0)

// A kernel launch reports bad configurations (and earlier asynchronous faults) through cudaGetLastError.
#define DD_CUDA_LAUNCH_CHECK() DD_CUDA_CHECK(cudaGetLastError())

namespace dd::cuops::detail {

// This thread's cuBLAS handle (plain FP32 math, no TF32), already set to stream().
cublasHandle_t cublas();

// This thread's device scratch buffer of at least `floats` floats, for kernels' partial results on the compute
// stream. Valid until the next call from this thread (which may grow it: it waits for the stream before freeing).
float* scratch(size_t floats);

// Blocks for a 1-D grid-stride launch over n elements (capped; the kernels loop).
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535 * 16 ? 65535 * 16 : b);
}

// cuBLAS takes int dimensions; refuse silently wrapped sizes.
inline int to_int(int64_t v, const char* what) {
  if (v < 0 || v > 2147483647LL)
    throw std::runtime_error(std::string("dd::cuops: ") + what + " = " + std::to_string(v) +
                             " does not fit cuBLAS/cuDNN int arguments");
  return static_cast<int>(v);
}

}  // namespace dd::cuops::detail
