// Row-major GEMM through oneDNN matmul primitives, created once per shape and reused (a per-thread cache: the
// attention kernels call gemm from inside a parallel region). Transposes are strides of the memory descriptors,
// alpha is an output scale, beta = 1 (or any beta) is a sum post-op, so C += A@B accumulates in place; a bias
// row and ReLU can ride along as the matmul's bias and an eltwise post-op. A shape the optimized matmul does not
// cover (oneDNN would pick its reference kernel) goes through dnnl_sgemm instead. A cached primitive runs the
// same code with the same blocking on every call, so a shape always gives the same bits for a thread count.
#include <dnnl.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/ops/ops.h"

namespace dd::ops {

namespace {
using dnnl::memory;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

void sgemm_raw(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success)
    throw std::runtime_error("dnnl_sgemm failed (status " + std::to_string(int(st)) + ") for M=" +
                             std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                             " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                             " ldc=" + std::to_string(ldc));
}

// Everything that decides the primitive: shape, strides, scales, epilogue, and the thread count it runs with.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, bool, bool,
                       int, bool>;

struct Entry {
  bool sgemm = false;  // no optimized matmul for this shape: use dnnl_sgemm (+ plain loops for the epilogue)
  dnnl::matmul prim;
  memory a, b, c, bias;
};

struct Cache {
  dnnl::stream stream{cpu_engine()};
  std::map<Key, Entry> entries;
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

// DD_GEMM=sgemm routes every GEMM through dnnl_sgemm (the pre-matmul path), for A/B timing and bisecting.
bool force_sgemm() {
  static const bool f = [] {
    const char* v = std::getenv("DD_GEMM");
    return v && std::strcmp(v, "sgemm") == 0;
  }();
  return f;
}

Entry make_entry(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, int64_t lda, int64_t ldb,
                 float beta, int64_t ldc, bool has_bias, bool relu) {
  Entry e;
  // Plain NN products (Linear's dx, attention's att @ V) stay on dnnl_sgemm: the same speed here (within 7%
  // at the model shapes), and it keeps their rounding what it was before the matmul path existed; see the
  // README of core/ops for why that matters to the mlp DDP-equivalence test.
  if (force_sgemm() || (!ta && !tb && !has_bias && !relu)) {
    e.sgemm = true;
    return e;
  }
  auto& eng = cpu_engine();
  memory::desc a_md({M, K}, dt::f32, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  memory::desc b_md({K, N}, dt::f32, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  memory::desc c_md({M, N}, dt::f32, memory::dims{ldc, 1});
  memory::desc bias_md({1, N}, dt::f32, memory::dims{N, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops po;
  if (beta != 0.f) po.append_sum(beta);
  if (relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  attr.set_post_ops(po);
  try {
    auto d = has_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    const std::string impl = pd.impl_info_str();
    if (impl.find("ref") != std::string::npos) {
      e.sgemm = true;
      return e;
    }
    e.prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    e.sgemm = true;
    return e;
  }
  e.a = memory(a_md, eng, DNNL_MEMORY_NONE);
  e.b = memory(b_md, eng, DNNL_MEMORY_NONE);
  e.c = memory(c_md, eng, DNNL_MEMORY_NONE);
  if (has_bias) e.bias = memory(bias_md, eng, DNNL_MEMORY_NONE);
  return e;
}

}  // namespace

void matmul(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
            const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias, bool relu) {
  if (M == 0 || N == 0) return;
  if (bias && alpha != 1.f) throw std::invalid_argument("ops::matmul: a bias needs alpha == 1");
  if (K == 0) {  // C = beta * C (+ bias, relu): nothing for a GEMM to do
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float v = beta == 0.f ? 0.f : beta * C[i * ldc + j];
        if (bias) v += bias[j];
        C[i * ldc + j] = relu && v < 0.f ? 0.f : v;
      }
    return;
  }
  Cache& cc = cache();
  const Key key{ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr, relu, omp_get_max_threads(),
                omp_in_parallel() != 0};
  auto it = cc.entries.find(key);
  if (it == cc.entries.end())
    it = cc.entries.emplace(key, make_entry(ta, tb, M, N, K, alpha, lda, ldb, beta, ldc, bias != nullptr, relu))
             .first;
  Entry& e = it->second;
  if (e.sgemm) {
    float b_eff = beta;
    if (bias) {  // C = beta*C + bias first, then the GEMM accumulates into it
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = (beta == 0.f ? 0.f : beta * C[i * ldc + j]) + bias[j];
      b_eff = 1.f;
    }
    sgemm_raw(ta, tb, M, N, K, alpha, A, lda, B, ldb, b_eff, C, ldc);
    if (relu)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = C[i * ldc + j] > 0.f ? C[i * ldc + j] : 0.f;
    return;
  }
  e.a.set_data_handle(const_cast<float*>(A));
  e.b.set_data_handle(const_cast<float*>(B));
  e.c.set_data_handle(C);
  if (bias) {
    e.bias.set_data_handle(const_cast<float*>(bias));
    e.prim.execute(cc.stream, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_BIAS, e.bias},
                               {DNNL_ARG_DST, e.c}});
  } else {
    e.prim.execute(cc.stream, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
  }
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  matmul(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, false);
}

}  // namespace dd::ops
