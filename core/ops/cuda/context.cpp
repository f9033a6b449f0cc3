// Compute stream, per-thread cuBLAS handle, device probe, and the cuBLAS-backed GEMMs (row-major on top of
// column-major cuBLAS by computing C^T = op(B)^T op(A)^T, which needs no data movement).
#include "core/ops/cuda/context.h"

#include <algorithm>
#include <atomic>

namespace dd::cuops {

namespace {
std::atomic<cudaStream_t> g_stream{nullptr};

// Destroyed at thread exit; errors are ignored there (the driver may already be shutting down).
struct CublasHandle {
  cublasHandle_t h = nullptr;
  ~CublasHandle() {
    if (h) detail::cublas_api().destroy(h);
  }
};
}  // namespace

bool cuda_available() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear it so later unrelated checks do not report it
    return false;
  }
  return n > 0;
}

void set_stream(cudaStream_t s) { g_stream.store(s); }
cudaStream_t stream() { return g_stream.load(); }

namespace detail {
cublasHandle_t cublas() {
  thread_local CublasHandle th;
  if (!th.h) {
    DD_CUBLAS_CHECK(cublas_api().create(&th.h));
    // Plain FP32 FMA math: TF32 tensor cores would drift ~1e-3 from the CPU reference.
    DD_CUBLAS_CHECK(cublas_api().set_math_mode(th.h, CUBLAS_DEFAULT_MATH));
  }
  DD_CUBLAS_CHECK(cublas_api().set_stream(th.h, stream()));
  return th.h;
}

float* scratch(size_t floats) {
  struct Buffer {
    float* p = nullptr;
    size_t n = 0;
    ~Buffer() {
      if (p) cudaFree(p);  // at thread exit; errors ignored, as for the cuBLAS handle
    }
  };
  thread_local Buffer b;
  if (floats > b.n) {
    if (b.p) {
      DD_CUDA_CHECK(cudaStreamSynchronize(stream()));  // earlier kernels may still read the old buffer
      DD_CUDA_CHECK(cudaFree(b.p));
      b.p = nullptr;
      b.n = 0;
    }
    const size_t n = std::max(floats, size_t(1) << 16);
    DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&b.p), n * sizeof(float)));
    b.n = n;
  }
  return b.p;
}
}  // namespace detail

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  using detail::to_int;
  if (M == 0 || N == 0) return;
  DD_CUBLAS_CHECK(detail::cublas_api().sgemm(detail::cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                              to_int(N, "N"), to_int(M, "M"), to_int(K, "K"), &alpha, B, to_int(ldb, "ldb"), A,
                              to_int(lda, "lda"), &beta, C, to_int(ldc, "ldc")));
}

void gemm_strided_batched(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                          int64_t sA, const float* B, int64_t ldb, int64_t sB, float beta, float* C, int64_t ldc,
                          int64_t sC, int64_t batch) {
  using detail::to_int;
  if (M == 0 || N == 0 || batch == 0) return;
  DD_CUBLAS_CHECK(detail::cublas_api().sgemm_strided_batched(detail::cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, to_int(N, "N"), to_int(M, "M"),
                                            to_int(K, "K"), &alpha, B, to_int(ldb, "ldb"), sB, A, to_int(lda, "lda"),
                                            sA, &beta, C, to_int(ldc, "ldc"), sC, to_int(batch, "batch")));
}

}  // namespace dd::cuops
