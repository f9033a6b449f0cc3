// Quantized reduce-scatter + all-gather with two-stage error feedback (see compressed_average.h).
#include "core/sync/merge/compressed_average.h"

#include <algorithm>
#include <vector>

#include "core/sync/merge/codec.h"

namespace dd::sync {

size_t compressed_shard(size_t n, int world) {
  return std::max<size_t>(1, (n + size_t(world) - 1) / size_t(world));
}

int64_t compressed_bytes(Codec c, size_t n, int world) {
  return int64_t(world) * int64_t(encoded_bytes(c, compressed_shard(n, world)));
}

WorkPtr compressed_average(Backend& g, Codec c, const float* x, size_t n, float* e1, float* e2, float* out) {
  const int N = g.size(), me = g.rank();
  const size_t S = compressed_shard(n, N), B = encoded_bytes(c, S);
  auto len = [=](int r) { return size_t(r) * S >= n ? size_t(0) : std::min(S, n - size_t(r) * S); };
  return g.run_bytes(
      [=](ByteChannel& ch) {
        std::vector<float> p(S), d(S);
        std::vector<uint8_t> send(size_t(N) * B), recv(size_t(N) * B);
        // Stage 1: every shard of this rank's payload x + e1, encoded; e1 keeps what the encoding left out.
        for (int r = 0; r < N; ++r) {
          const size_t off = size_t(r) * S, m = len(r);
          std::fill(p.begin(), p.end(), 0.0f);
          for (size_t i = 0; i < m; ++i) p[i] = x[off + i] + e1[off + i];
          encode(c, p.data(), S, send.data() + size_t(r) * B);
          decode(c, send.data() + size_t(r) * B, S, d.data());
          for (size_t i = 0; i < m; ++i) e1[off + i] = p[i] - d[i];
        }
        ch.alltoall(send.data(), recv.data(), B);
        // The owned shard: the world's contributions decoded and averaged in rank order, plus e2, encoded.
        const size_t off = size_t(me) * S, m = len(me);
        std::vector<double> sum(S, 0.0);
        for (int r = 0; r < N; ++r) {
          decode(c, recv.data() + size_t(r) * B, S, d.data());
          for (size_t i = 0; i < m; ++i) sum[i] += double(d[i]);
        }
        std::fill(p.begin(), p.end(), 0.0f);
        for (size_t i = 0; i < m; ++i) p[i] = float(sum[i] / N) + e2[off + i];
        std::vector<uint8_t> mine(B);
        encode(c, p.data(), S, mine.data());
        decode(c, mine.data(), S, d.data());
        for (size_t i = 0; i < m; ++i) e2[off + i] = p[i] - d[i];
        ch.allgather(mine.data(), recv.data(), B);
        for (int r = 0; r < N; ++r) {
          decode(c, recv.data() + size_t(r) * B, S, d.data());
          std::copy(d.begin(), d.begin() + long(len(r)), out + size_t(r) * S);
        }
      },
      "compressed average", size_t(N) * B);
}

WorkPtr compressed_average_sizes(Backend& g, Codec c, size_t n) {
  const size_t N = size_t(g.size()), B = encoded_bytes(c, compressed_shard(n, int(N)));
  return g.run_bytes(
      [B](ByteChannel& ch) {
        ch.alltoall(nullptr, nullptr, B);
        ch.allgather(nullptr, nullptr, B);
      },
      "compressed average", N * B);
}

}  // namespace dd::sync
