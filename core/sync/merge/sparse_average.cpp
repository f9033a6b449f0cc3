// All-gather of top-K payloads with error feedback, summed in rank order (see sparse_average.h).
#include "core/sync/merge/sparse_average.h"

#include <vector>

#include "core/sync/merge/topk.h"

namespace dd::sync {

int64_t sparse_bytes(const TopK& t, size_t n, int world) {
  const int64_t b = int64_t(topk_bytes(n, t));
  return world < 2 ? b : (int64_t(world) * b + 1) / 2;
}

WorkPtr sparse_average(Backend& g, const TopK& t, const float* x, size_t n, float* e1, float* out) {
  const int N = g.size();
  const size_t B = topk_bytes(n, t);
  return g.run_bytes(
      [=](ByteChannel& ch) {
        std::vector<float> p(n), sent(n);
        for (size_t i = 0; i < n; ++i) p[i] = x[i] + e1[i];
        std::vector<uint8_t> mine(B), all(size_t(N) * B);
        topk_encode(p.data(), n, t, mine.data(), sent.data());
        for (size_t i = 0; i < n; ++i) e1[i] = p[i] - sent[i];
        ch.allgather(mine.data(), all.data(), B);
        std::vector<double> sum(n, 0.0);
        for (int r = 0; r < N; ++r) topk_decode_add(all.data() + size_t(r) * B, n, t, sum.data());
        for (size_t i = 0; i < n; ++i) out[i] = float(sum[i] / N);
      },
      "sparse average", size_t(N) * B);
}

WorkPtr sparse_average_sizes(Backend& g, const TopK& t, size_t n) {
  const size_t B = topk_bytes(n, t);
  return g.run_bytes([B](ByteChannel& ch) { ch.allgather(nullptr, nullptr, B); }, "sparse average",
                     size_t(g.size()) * B);
}

}  // namespace dd::sync
