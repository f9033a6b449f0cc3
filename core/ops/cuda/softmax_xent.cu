// Softmax + cross-entropy (mean over rows): one block per row (max/argmax, sum of exp, probs, row loss), then
// one block sums the rows in a fixed order (double) and the 16-byte result is copied to the host.
#include <string>

#include "base/error.h"
#include "core/ops/cuda/context.h"
#include "core/ops/cuda/reduce.cuh"

namespace dd::cuops {

namespace {
using detail::block_max;
using detail::block_sum;
constexpr int kRowThreads = 128;

struct XentResult {
  float loss;       // mean loss
  int32_t bad_row;  // first row whose target is outside [0, V), or -1
  int64_t hits;     // rows with argmax == target
};

// row_loss[n]: log(sum exp(l - m)) + m - l[target]; row_flag[n]: 1 hit, 0 miss, -1 bad target.
__global__ void xent_rows_k(float* probs, float* row_loss, int32_t* row_flag, const float* logits,
                            const int32_t* targets, int64_t V) {
  const int64_t n = blockIdx.x;
  const float* l = logits + n * V;
  float* p = probs + n * V;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m);
  // argmax as the CPU: the first index holding the maximum.
  int am = int(V);
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
    if (l[j] == m && j < am) am = int(j);
  am = -block_max(-am);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(l[j] - m);
    p[j] = e;
    s += e;
  }
  s = block_sum(s);
  const float inv = 1.f / s;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) p[j] *= inv;
  if (threadIdx.x == 0) {
    const int32_t tg = targets[n];
    if (tg < 0 || tg >= V) {
      row_loss[n] = 0.f;
      row_flag[n] = -1;
    } else {
      row_loss[n] = logf(s) + m - l[tg];
      row_flag[n] = am == tg ? 1 : 0;
    }
  }
}

__global__ void xent_total_k(XentResult* res, const float* row_loss, const int32_t* row_flag, int64_t N) {
  double loss = 0;
  long long hits = 0;
  int bad = int(N);
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    loss += double(row_loss[n]);
    hits += row_flag[n] > 0;
    if (row_flag[n] < 0 && n < bad) bad = int(n);
  }
  loss = block_sum(loss);
  hits = block_sum(hits);
  bad = -detail::block_max(-bad);
  if (threadIdx.x == 0) {
    res->loss = float(loss / double(N));
    res->hits = hits;
    res->bad_row = bad < N ? bad : -1;
  }
}

// Per-thread device scratch for the row results, grown on demand (growth frees, which synchronizes).
struct XentScratch {
  void* p = nullptr;
  size_t bytes = 0;
  ~XentScratch() {
    if (p) cudaFree(p);
  }
  void* get(size_t need) {
    if (need > bytes) {
      if (p) DD_CUDA_CHECK(cudaFree(p));
      p = nullptr;
      DD_CUDA_CHECK(cudaMalloc(&p, need));
      bytes = need;
    }
    return p;
  }
};

__global__ void xent_bwd_k(float* dl, const float* probs, const int32_t* targets, int64_t N, int64_t V, float scale) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < N * V; e += int64_t(gridDim.x) * blockDim.x) {
    const float d = probs[e] * scale;
    dl[e] = (e % V) == targets[e / V] ? d - scale : d;
  }
}
}  // namespace

float softmax_xent_forward(float* probs, const float* logits, const int32_t* targets, int64_t N, int64_t V,
                           int64_t* correct) {
  if (N <= 0 || V <= 0) throw UsageError("softmax_xent_forward needs N > 0 rows and V > 0 classes");
  detail::to_int(N, "N");
  thread_local XentScratch scratch;
  // Layout: XentResult, then N row losses, then N row flags (all 4- or 8-byte aligned).
  char* base = static_cast<char*>(scratch.get(sizeof(XentResult) + size_t(N) * 8));
  auto* res = reinterpret_cast<XentResult*>(base);
  auto* row_loss = reinterpret_cast<float*>(base + sizeof(XentResult));
  auto* row_flag = reinterpret_cast<int32_t*>(row_loss + N);
  xent_rows_k<<<unsigned(N), kRowThreads, 0, stream()>>>(probs, row_loss, row_flag, logits, targets, V);
  DD_CUDA_LAUNCH_CHECK();
  xent_total_k<<<1, 256, 0, stream()>>>(res, row_loss, row_flag, N);
  DD_CUDA_LAUNCH_CHECK();
  XentResult h{};
  DD_CUDA_CHECK(cudaMemcpyAsync(&h, res, sizeof(h), cudaMemcpyDeviceToHost, stream()));
  DD_CUDA_CHECK(cudaStreamSynchronize(stream()));
  if (h.bad_row >= 0)
    throw UsageError("target at row " + std::to_string(h.bad_row) + " outside [0, " + std::to_string(V) + ")");
  if (correct) *correct = h.hits;
  return h.loss;
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, int64_t N, int64_t V,
                           float scale) {
  if (N * V <= 0) return;
  xent_bwd_k<<<detail::blocks_for(N * V), detail::kThreads, 0, stream()>>>(dlogits, probs, targets, N, V, scale);
  DD_CUDA_LAUNCH_CHECK();
}

}  // namespace dd::cuops
