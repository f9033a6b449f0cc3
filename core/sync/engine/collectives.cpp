// Collectives: fingerprinted, counted collectives of the sync engine (collectives.h).
#include "core/sync/engine/collectives.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include "core/sync/merge/compressed_average.h"
#include "core/sync/merge/sparse_average.h"

namespace dd::sync {

void Collectives::fingerprint(const char* what, int64_t n) {
  const int64_t seq = seq_++;
  if (!check_) return;
  std::ostringstream s;
  s << "#" << seq << " step " << step_ << " " << what << " floats=" << n;
  auto all = world_.allgather(s.str());
  const int me = world_.rank();
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[size_t(me)])
      throw std::runtime_error("--check-collectives: collective mismatch: rank " + std::to_string(me) + " issues '" +
                               all[size_t(me)] + "' but rank " + std::to_string(r) + " issues '" + all[r] + "'");
}

WorkPtr Collectives::average(Backend& g, float* p, int64_t n, const char* what, int ready_layer) {
  fingerprint(what, n);
  stats_.bytes += 4 * n;
  ++stats_.collectives;
  auto start = [&] { return dp_.allreduce(g, p, size_t(n), ReduceOp::Avg, ready_layer); };
  return undo_ ? undo_->launch(p, size_t(n), start) : start();
}

WorkPtr Collectives::compressed(Backend& g, Codec c, float* buf, int64_t n, float* e1, float* e2, int64_t* bytes,
                                const TopK& topk) {
  fingerprint(c == Codec::Int8   ? "average-params-int8"
              : c == Codec::TopK ? "average-params-topk"
                                 : "average-params-bf16",
              n);
  const int64_t sent = c == Codec::TopK ? sparse_bytes(topk, size_t(n), g.size()) : compressed_bytes(c, size_t(n), g.size());
  stats_.bytes += sent;
  *bytes += sent;
  ++stats_.collectives;
  // Host memory throughout (the payload staged there when the arenas are not): the data path queues it in the
  // order of its own collectives (run_host).
  const bool data = dp_.moves_data();
  const std::function<WorkPtr()> codec = [&g, c, buf, n, e1, e2, topk, data]() -> WorkPtr {
    if (c == Codec::TopK)
      return data ? sparse_average(g, topk, buf, size_t(n), e1, buf) : sparse_average_sizes(g, topk, size_t(n));
    return data ? compressed_average(g, c, buf, size_t(n), e1, e2, buf) : compressed_average_sizes(g, c, size_t(n));
  };
  auto start = [&] { return dp_.run_host(codec); };
  return undo_ && dp_.moves_data() ? undo_->launch(buf, size_t(n), start) : start();
}

}  // namespace dd::sync
