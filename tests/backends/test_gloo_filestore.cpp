// Gloo backend with ranks as processes over a FileStore rendezvous, including a rank that dies mid-job.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "backends/gloo/gloo_backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "tests/backends/spawn_ranks.h"

namespace dd {
namespace {

std::string fresh_dir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() /
           ("dd-filestore-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(now_s()));
  std::filesystem::remove_all(d);
  return d.string();
}

BackendOptions opts(int rank, int world, const std::string& dir, double timeout) {
  BackendOptions o;
  o.kind = dd::BackendKind::Gloo;
  o.rank = rank;
  o.world = world;
  o.rendezvous = "file://" + dir;
  o.timeout_s = timeout;
  o.prefix = "fs";
  return o;
}

TEST(GlooFileStore, ThreeProcessesAllreduceAndSplit) {
  const int n = 3;
  const std::string dir = fresh_dir("ok");
  auto st = test::fork_ranks(n, [&](int r) {
    auto be = make_gloo_backend(opts(r, n, dir, 20));
    std::vector<float> v(300007);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * (i % 5));
    be->allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] != static_cast<float>(6 * (i % 5))) return 10;
    auto g = be->split(r == 0 ? 0 : 1);
    float x = static_cast<float>(r);
    g->allreduce(&x, 1, ReduceOp::Sum)->wait();
    if (x != (r == 0 ? 0.0f : 3.0f)) return 11;
    auto all = be->allgather("r" + std::to_string(r));
    if (all != std::vector<std::string>{"r0", "r1", "r2"}) return 12;
    be->barrier();
    return 0;
  });
  EXPECT_EQ(st, (std::vector<int>{0, 0, 0}));
  std::filesystem::remove_all(dir);
}

TEST(GlooFileStore, KilledProcessGivesPeerLostNamingIt) {
  const int n = 2;
  const double timeout = 2;
  const std::string dir = fresh_dir("dead");
  auto st = test::fork_ranks(
      n,
      [&](int r) {
        auto be = make_gloo_backend(opts(r, n, dir, timeout));
        be->barrier();
        if (r == 1) _exit(42);  // dies without any clean-up, like a crash
        std::vector<float> v(1 << 18, 1.0f);
        double t0 = now_s();
        try {
          be->allreduce(v.data(), v.size(), ReduceOp::Sum)->wait();
        } catch (const PeerLost& e) {
          const double dt = now_s() - t0;
          bool named = std::string(e.what()).find("lost rank 1") != std::string::npos;
          std::fprintf(stderr, "rank 0 saw after %.2f s: %s\n", dt, e.what());
          return named && dt < timeout + 4 ? 3 : 20;
        }
        return 21;
      },
      30);
  EXPECT_EQ(st, (std::vector<int>{3, 42}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dd
