// InPlaceUndo (core/sync/engine/in_place_undo.h) behind the engine's Collectives, on a backend whose collectives
// overwrite their data and then either finish or fail as a lost peer does: an unfinished average on the training
// state is put back bitwise, a finished one stays, and ranges outside the state (gradients) cost no copy.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "core/sync/engine/collectives.h"
#include "core/sync/engine/in_place_undo.h"

namespace dd::sync {
namespace {

// A collective that has written partial sums (x2, as a ring step with a peer's equal values would) before it ends.
class ScribbleWork final : public Work {
 public:
  explicit ScribbleWork(bool fail) : fail_(fail) {}
  void wait() override {
    if (fail_) throw PeerLost("peer lost (test)");
  }
  bool test() override { return true; }

 private:
  bool fail_;
};

class ScribbleBackend final : public Backend {
 public:
  bool fail = false;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "scribble"; }
  WorkPtr allreduce(float* data, size_t n, ReduceOp) override {
    for (size_t i = 0; i < n; ++i) data[i] *= 2;
    return std::make_shared<ScribbleWork>(fail);
  }
  WorkPtr broadcast(float*, size_t, int) override { return std::make_shared<ScribbleWork>(fail); }
  std::vector<std::string> allgather(const std::string& b) override { return {b, b}; }
  void barrier() override {}
  std::unique_ptr<Backend> split(int) override { return nullptr; }
  void set_timeout(double) override {}
  double timeout() const override { return 1; }
};

std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.1f * float(i) - 3.3f;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

struct Rig {
  ScribbleBackend b;
  HostDataPath dp;
  std::vector<float> params = values(64), grads = values(64);
  std::shared_ptr<InPlaceUndo> undo = std::make_shared<InPlaceUndo>();
  Collectives coll{dp, b, false, undo};
  Rig() { undo->protect(params.data(), params.size()); }
};

TEST(InPlaceUndo, UnfinishedAverageOnTheStateIsPutBackBitwise) {
  Rig r;
  const auto before = r.params;
  r.b.fail = true;
  auto w1 = r.coll.average(r.b, r.params.data(), 16, "average-params");        // layer 0
  auto w2 = r.coll.average(r.b, r.params.data() + 16, 48, "average-params");   // layer 1
  EXPECT_THROW(w1->wait(), PeerLost);
  EXPECT_FALSE(same_bits(r.params, before)) << "the backend did not overwrite: the test would prove nothing";
  EXPECT_EQ(r.undo->in_flight(), 2u);
  EXPECT_EQ(r.undo->undo(), 64u);
  EXPECT_TRUE(same_bits(r.params, before));
  EXPECT_EQ(r.undo->in_flight(), 0u);
  EXPECT_EQ(r.undo->undo(), 0u);  // forgotten once put back
}

TEST(InPlaceUndo, FinishedAverageStaysAndIsForgotten) {
  Rig r;
  auto w = r.coll.average(r.b, r.params.data(), 64, "average-params");
  w->wait();
  const auto after = r.params;
  EXPECT_EQ(r.undo->in_flight(), 0u);
  EXPECT_EQ(r.undo->undo(), 0u);
  EXPECT_TRUE(same_bits(r.params, after));
  // A finished one, then an unfinished one on the same floats: only the second is put back, to its own start.
  r.b.fail = true;
  auto f = r.coll.average(r.b, r.params.data(), 64, "average-params");
  EXPECT_THROW(f->wait(), PeerLost);
  EXPECT_EQ(r.undo->undo(), 64u);
  EXPECT_TRUE(same_bits(r.params, after));
}

TEST(InPlaceUndo, GradientsAndCopiesAreNotKept) {
  Rig r;
  r.b.fail = true;
  auto w = r.coll.average(r.b, r.grads.data(), 64, "average-grads");
  EXPECT_THROW(w->wait(), PeerLost);
  EXPECT_EQ(r.undo->kept_floats(), 0);
  EXPECT_EQ(r.undo->undo(), 0u);
  // A range reaching past the state's arena is not the state's.
  EXPECT_FALSE(r.undo->covers(r.params.data() + 32, 64));
  EXPECT_TRUE(r.undo->covers(r.params.data() + 32, 32));
}

TEST(InPlaceUndo, AWorkOutlivingItsLogDoesNotTouchIt) {
  ScribbleBackend b;
  HostDataPath dp;
  std::vector<float> p = values(8);
  WorkPtr w;
  {
    auto undo = std::make_shared<InPlaceUndo>();
    undo->protect(p.data(), p.size());
    Collectives coll(dp, b, false, undo);
    w = coll.average(b, p.data(), 8, "average-params");
  }
  w->wait();  // the log is gone (a rebuilt world's trainer): nothing to forget, no crash
}

}  // namespace
}  // namespace dd::sync
