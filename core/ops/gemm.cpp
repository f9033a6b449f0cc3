// Row-major GEMM through oneDNN matmul primitives, created once per shape and reused (a per-thread cache: the
// attention kernels call gemm from inside a parallel region). Transposes are strides of the memory descriptors,
// alpha is an output scale, beta = 1 (or any beta) is a sum post-op, so C += A@B accumulates in place; a bias
// row and ReLU can ride along as the matmul's bias and an eltwise post-op. A shape the optimized matmul does not
// cover (oneDNN would pick its reference kernel) goes through dnnl_sgemm instead. A cached primitive runs the
// same code with the same blocking on every call, so a shape always gives the same bits for a thread count.
// Under --precision bf16 (base/precision.h) every GEMM, plain NN products included, rounds A and B to bf16 (into
// per-thread scratch, in the caller's layout) and runs a matmul primitive on bf16 inputs with an fp32 destination
// (oneDNN's avx512_core_bf16 / AMX kernels). oneDNN 2.6's fpmath_mode::bf16 on the f32 primitive is not used: on
// avx512_bf16 without AMX it keeps the f32 kernel and its bits. A shape without an optimized bf16 matmul runs
// dnnl_sgemm on the bf16-rounded inputs: the same products (exact in fp32), fp32 speed.
// On a CPU without AVX-512 (oneDNN's AVX2 kernels) a large transposed A (a weight gradient dY^T X over many rows)
// runs at about half the rate of the same product with A in row order, in dnnl_sgemm and in the matmul alike: there
// A is transposed into scratch first (a blocked copy, a few percent of the product) and the product runs untransposed.
#include <dnnl.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>
#include <algorithm>

#include "core/ops/bf16.h"
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
                       int, bool, bool>;

struct Entry {
  bool sgemm = false;  // no optimized matmul for this shape: use dnnl_sgemm (+ plain loops for the epilogue)
  bool bf16 = false;   // inputs rounded to bf16 first (the matmul reads bf16, sgemm their fp32 widening)
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
                 float beta, int64_t ldc, bool has_bias, bool relu, bool bf16) {
  Entry e;
  e.bf16 = bf16;
  // Plain NN products (Linear's dx, attention's att @ V) stay on dnnl_sgemm: the same speed here (within 7%
  // at the model shapes), and it keeps their rounding what it was before the matmul path existed; see the
  // README of core/ops for why that matters to the mlp DDP-equivalence test.
  if (force_sgemm() || (!bf16 && !ta && !tb && !has_bias && !relu)) {
    e.sgemm = true;
    return e;
  }
  auto& eng = cpu_engine();
  // bf16: the scratch copies are dense in the caller's layout (leading dimension M or K for A, K or N for B).
  if (bf16) lda = ta ? M : K, ldb = tb ? K : N;
  const dt in_t = bf16 ? dt::bf16 : dt::f32;
  memory::desc a_md({M, K}, in_t, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  memory::desc b_md({K, N}, in_t, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
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

// oneDNN's kernels on this CPU are its AVX2 ones (no avx512_core): the ones slow on a large transposed A.
bool avx2_kernels() {
  static const bool slow = [] {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
  }();
  return slow;
}

// A transposed A of at least this many values (4 MiB, beyond a core's L2) is copied into row order first there.
constexpr int64_t kTransposeFirst = int64_t(1) << 20;

// There too, a transposed-A product whose B rows lie a multiple of 1 KiB apart (a layer width of 256, 512, 1024
// ...) over many rows runs at half its rate, even at a third: the kernel walks down B's rows, and rows that far apart
// fall into the same cache sets. gpt-mini's weight gradient of mlp.proj (256 x 1024 over 1024 rows) took 13.4 ms
// where B copied to rows 16 values longer took 6.6 ms, the copy included (0.2 ms). A shape always takes the same
// path, so its bits stay the same from call to call.
constexpr int64_t kPadRowsFrom = 256, kPadAlign = 256, kPad = 16;
bool pad_b(bool ta, int64_t K, int64_t ldb) { return ta && K >= kPadRowsFrom && ldb % kPadAlign == 0; }

// Per-thread scratch for the bf16 copies (or their fp32 widening); nothing is kept between calls.
template <typename T>
T* scratch(int which, size_t n) {
  thread_local std::vector<T> buf[2];
  if (buf[which].size() < n) buf[which].resize(n);
  return buf[which].data();
}

// The rows (runs of contiguous values) of op(X) as stored: X is rows x cols with leading dimension ld.
struct Stored {
  int64_t rows, cols;
};
Stored stored_a(bool ta, int64_t M, int64_t K) { return ta ? Stored{K, M} : Stored{M, K}; }
Stored stored_b(bool tb, int64_t K, int64_t N) { return tb ? Stored{N, K} : Stored{K, N}; }

template <typename Out, void (*Conv)(Out*, const float*, int64_t, int64_t, int64_t)>
Out* convert(int which, const float* X, Stored s, int64_t ld) {
  Out* out = scratch<Out>(which, size_t(s.rows * s.cols));
  const int64_t chunk = 64;
  const bool par = !omp_in_parallel() && omp_get_max_threads() > 1 && s.rows * s.cols >= (int64_t(1) << 18);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r0 = 0; r0 < s.rows; r0 += chunk)
    Conv(out + r0 * s.cols, X + r0 * ld, std::min(chunk, s.rows - r0), s.cols, ld);
  return out;
}

// out (cols x rows, dense) = X^T for X rows x cols with leading dimension ld; 8 x 8 blocks keep both sides in cache
// lines (a power-of-two ld would make longer strides collide in the cache).
void transpose_into(float* __restrict out, const float* __restrict X, int64_t rows, int64_t cols, int64_t ld) {
  constexpr int64_t b = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += b)
    for (int64_t c0 = 0; c0 < cols; c0 += b)
      for (int64_t c = c0; c < std::min(c0 + b, cols); ++c)
        for (int64_t r = r0; r < std::min(r0 + b, rows); ++r) out[c * rows + r] = X[r * ld + c];
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
  const bool fp32_avx2 = precision() != Precision::bf16 && !force_sgemm() && avx2_kernels();
  if (!tb && !bias && !relu && fp32_avx2 && pad_b(ta, K, ldb)) {
    const int64_t ldp = N + kPad;
    float* Bp = scratch<float>(1, size_t(K * ldp));  // scratch 0 may hold the transposed A below
    for (int64_t r = 0; r < K; ++r) std::memcpy(Bp + r * ldp, B + r * ldb, 4 * size_t(N));
    matmul(ta, tb, M, N, K, alpha, A, lda, Bp, ldp, beta, C, ldc, nullptr, false);
    return;
  }
  if (ta && !bias && !relu && M * K >= kTransposeFirst && fp32_avx2) {
    float* At = scratch<float>(0, size_t(M * K));  // op(A) in row order: M x K, leading dimension K
    transpose_into(At, A, K, M, lda);
    matmul(false, tb, M, N, K, alpha, At, K, B, ldb, beta, C, ldc, nullptr, false);
    return;
  }
  Cache& cc = cache();
  const Key key{ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr, relu, omp_get_max_threads(),
                omp_in_parallel() != 0, precision() == Precision::bf16};
  auto it = cc.entries.find(key);
  if (it == cc.entries.end())
    it = cc.entries.emplace(key, make_entry(ta, tb, M, N, K, alpha, lda, ldb, beta, ldc, bias != nullptr, relu,
                                          std::get<14>(key)))
             .first;
  Entry& e = it->second;
  const Stored sa = stored_a(ta, M, K), sb = stored_b(tb, K, N);
  if (e.sgemm && e.bf16) {  // bf16-rounded inputs, dense, through the fp32 path below
    A = convert<float, round_bf16_rows>(0, A, sa, lda);
    B = convert<float, round_bf16_rows>(1, B, sb, ldb);
    lda = sa.cols, ldb = sb.cols;
  }
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
  if (e.bf16) {
    e.a.set_data_handle(convert<uint16_t, to_bf16_rows>(0, A, sa, lda));
    e.b.set_data_handle(convert<uint16_t, to_bf16_rows>(1, B, sb, ldb));
  } else {
    e.a.set_data_handle(const_cast<float*>(A));
    e.b.set_data_handle(const_cast<float*>(B));
  }
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
