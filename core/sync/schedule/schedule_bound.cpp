// Lower bounds for the schedule solver: the capacity bound and a max-flow (preemptive relaxation) bound.
#include "core/sync/schedule/schedule_bound.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>

#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

namespace {

// Dinic's max flow on real capacities; graphs here are small (about L^2 / 2 edges).
class MaxFlow {
 public:
  explicit MaxFlow(int n, double eps) : adj_(n), level_(n), next_(n), eps_(eps) {}

  void add_edge(int u, int v, double cap) {
    adj_[u].push_back({v, static_cast<int>(adj_[v].size()), cap});
    adj_[v].push_back({u, static_cast<int>(adj_[u].size()) - 1, 0.0});
  }

  double run(int s, int t) {
    double total = 0.0;
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (double f = dfs(s, t, std::numeric_limits<double>::infinity())) total += f;
    }
    return total;
  }

 private:
  struct Edge {
    int to, rev;
    double cap;
  };

  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (auto& e : adj_[u])
        if (e.cap > eps_ && level_[e.to] < 0) {
          level_[e.to] = level_[u] + 1;
          q.push(e.to);
        }
    }
    return level_[t] >= 0;
  }

  double dfs(int u, int t, double f) {
    if (u == t) return f;
    for (int& i = next_[u]; i < static_cast<int>(adj_[u].size()); ++i) {
      Edge& e = adj_[u][i];
      if (e.cap > eps_ && level_[e.to] == level_[u] + 1) {
        double got = dfs(e.to, t, std::min(f, e.cap));
        if (got > 0.0) {
          e.cap -= got;
          adj_[e.to][e.rev].cap += got;
          return got;
        }
      }
    }
    return 0.0;
  }

  std::vector<std::vector<Edge>> adj_;
  std::vector<int> level_, next_;
  double eps_;
};

}  // namespace

double simple_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H) {
  if (H < 1 || b.size() != c.size()) throw std::invalid_argument("simple_lower_bound: bad inputs");
  const double B = total_backward(b);
  const double C = std::accumulate(c.begin(), c.end(), 0.0);
  return B + std::max(0.0, C - H * B) / H;
}

double flow_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H) {
  if (H < 1 || b.size() != c.size()) throw std::invalid_argument("flow_lower_bound: bad inputs");
  const int L = static_cast<int>(b.size());
  const double B = total_backward(b);
  const double C = std::accumulate(c.begin(), c.end(), 0.0);
  const auto R = ready_times(b);

  // Time intervals [t_k, t_{k+1}) between distinct ready times, the last one ending at B.
  std::vector<double> t(R.begin(), R.end());
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  std::vector<double> starts, lens;
  for (size_t k = 0; k < t.size(); ++k) {
    double stop = k + 1 < t.size() ? t[k + 1] : B;
    if (stop > t[k]) {
      starts.push_back(t[k]);
      lens.push_back(stop - t[k]);
    }
  }
  const int K = static_cast<int>(starts.size());
  const int src = 0, sink = 1 + L + K;
  MaxFlow g(sink + 1, 1e-15 * (B + C + 1e-300));
  for (int l = 0; l < L; ++l) {
    if (c[l] <= 0.0) continue;
    g.add_edge(src, 1 + l, c[l]);
    for (int k = 0; k < K; ++k)
      if (starts[k] >= R[l]) g.add_edge(1 + l, 1 + L + k, lens[k]);
  }
  for (int k = 0; k < K; ++k) g.add_edge(1 + L + k, sink, H * lens[k]);
  const double hidden = std::min(C, g.run(src, sink));
  return B + std::max(0.0, C - hidden) / H;
}

double schedule_lower_bound(const std::vector<double>& b, const std::vector<double>& c, int H) {
  return std::max(simple_lower_bound(b, c, H), flow_lower_bound(b, c, H));
}

}  // namespace dd::sync
