// Row-major sgemm through oneDNN's dnnl_sgemm (which is itself row-major and takes 'N'/'T' flags).
#include <dnnl.h>

#include <stdexcept>
#include <string>

#include "core/ops/ops.h"

namespace dd::ops {

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success)
    throw std::runtime_error("dnnl_sgemm failed (status " + std::to_string(int(st)) + ") for M=" +
                             std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                             " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                             " ldc=" + std::to_string(ldc));
}

}  // namespace dd::ops
