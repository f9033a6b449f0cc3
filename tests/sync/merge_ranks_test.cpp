// Transformed layer averages on ranks as threads over Gloo: the compressed average is bitwise equal on every rank
// and within the quantization bound of the true average; error feedback keeps the accumulated error of many syncs
// bounded (and without it the error grows); outer=nesterov:lr=1,momentum=0 trains as plain averaging; outer=avg,
// compress=none is today's engine bit for bit; a compressed, outer-stepped layer is bitwise equal on all ranks right
// after its sync.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/merge/codec.h"
#include "core/sync/merge/compressed_average.h"
#include "core/sync/merge/sparse_average.h"
#include "core/sync/merge/topk.h"
#include "core/sync/policy/registry.h"
#include "core/tensor/rng.h"
#include "tests/sync/ranks_harness.h"

using namespace dd;
using namespace dd::testing_harness;

namespace {

std::vector<float> rank_values(size_t n, int rank) {
  Rng r(100 + uint64_t(rank));
  std::vector<float> v(n);
  for (auto& x : v) x = 2 * r.uniform() - 1 + 0.1f * float(rank);
  return v;
}

// The true average of rank_values over `world` ranks, in double.
std::vector<double> true_average(size_t n, int world) {
  std::vector<double> a(n, 0);
  for (int r = 0; r < world; ++r) {
    auto v = rank_values(n, r);
    for (size_t i = 0; i < n; ++i) a[i] += v[i] / world;
  }
  return a;
}

}  // namespace

TEST(CompressedAverage, EqualOnEveryRankAndWithinTheBound) {
  for (sync::Codec c : {sync::Codec::Int8, sync::Codec::Bf16}) {
    for (int world : {2, 3}) {
      const size_t n = 1000;  // not a multiple of the shard: padding is exercised
      std::vector<std::vector<float>> out(world);
      std::vector<double> bound(world);
      run_ranks(world, [&](int r, Backend& be) {
        auto x = rank_values(n, r);
        std::vector<float> e1(n, 0), e2(n, 0), y(n);
        sync::compressed_average(be, c, x.data(), n, e1.data(), e2.data(), y.data())->wait();
        out[r] = y;
        bound[r] = sync::codec_error_bound(c, x.data(), n);
      });
      for (int r = 1; r < world; ++r) EXPECT_EQ(0, std::memcmp(out[0].data(), out[r].data(), 4 * n)) << "rank " << r;
      // Stage 1 errs by at most the largest rank bound, stage 2 by the codec's bound on the average (|avg| <= max|x|).
      double b = 0;
      for (double v : bound) b = std::max(b, v);
      const double tol = 2 * b * 1.01;
      auto avg = true_average(n, world);
      double worst = 0;
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(out[0][i] - avg[i]));
      EXPECT_LE(worst, tol) << sync::codec_name(c) << " world " << world;
      EXPECT_GT(worst, 0) << "nothing was quantized?";
      EXPECT_LT(sync::compressed_bytes(c, n, world), int64_t(4 * n) * (c == sync::Codec::Int8 ? 3 : 6) / 10);
    }
  }
}

// The same payloads synced K times: with error feedback the sum of the K results stays within a couple of
// quantization steps of K x the true average; with the residuals reset every time (no feedback) the same rounding
// repeats and the error grows with K.
TEST(CompressedAverage, ErrorFeedbackKeepsTheAccumulatedErrorBounded) {
  const int world = 2, K = 60;
  const size_t n = 512;
  std::vector<double> with_fb(world), without_fb(world);
  double step = 0;
  run_ranks(world, [&](int r, Backend& be) {
    auto x = rank_values(n, r);
    const auto avg = true_average(n, world);
    for (bool feedback : {true, false}) {
      std::vector<float> e1(n, 0), e2(n, 0), y(n);
      std::vector<double> sum(n, 0);
      for (int k = 0; k < K; ++k) {
        if (!feedback) std::fill(e1.begin(), e1.end(), 0.0f), std::fill(e2.begin(), e2.end(), 0.0f);
        sync::compressed_average(be, sync::Codec::Int8, x.data(), n, e1.data(), e2.data(), y.data())->wait();
        for (size_t i = 0; i < n; ++i) sum[i] += y[i];
      }
      double worst = 0;
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(sum[i] - K * avg[i]));
      (feedback ? with_fb : without_fb)[r] = worst;
    }
    if (r == 0) step = sync::codec_error_bound(sync::Codec::Int8, x.data(), n);
  });
  // Bounded: the residuals themselves (each below one quantization step per stage, plus float rounding of the sums).
  EXPECT_LT(with_fb[0], 4 * step + 1e-4 * K);
  EXPECT_GT(without_fb[0], 10 * with_fb[0]) << "without feedback the error should grow with K";
  EXPECT_EQ(with_fb[0], with_fb[1]);
}

// compress=topk: every rank ends with the same bits, and those are exactly the rank-order sum of each rank's own
// top-K entries over the world (recomputed here from the payloads, independently of the all-gather); the bytes are
// one payload per rank pair (N/2 payloads, see sparse_average.h).
TEST(SparseAverage, EqualOnEveryRankAndExactlyTheSumOfTheTopSets) {
  for (bool int8 : {false, true}) {
    for (int world : {2, 3}) {
      const size_t n = 5000;
      sync::TopK t;
      t.percent = 1;
      t.int8 = int8;
      std::vector<std::vector<float>> out(world), sent(world), e1s(world);
      run_ranks(world, [&](int r, Backend& be) {
        auto x = rank_values(n, r);
        std::vector<float> e1(n, 0), y(n);
        sync::sparse_average(be, t, x.data(), n, e1.data(), y.data())->wait();
        out[r] = y;
        e1s[r] = e1;
        // What this rank's payload holds, encoded again outside the collective (a pure function of x).
        std::vector<uint8_t> enc(sync::topk_bytes(n, t));
        sent[r].resize(n);
        sync::topk_encode(x.data(), n, t, enc.data(), sent[r].data());
      });
      for (int r = 1; r < world; ++r) EXPECT_EQ(0, std::memcmp(out[0].data(), out[r].data(), 4 * n)) << "rank " << r;
      size_t nonzero = 0;
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < world; ++r) xs.push_back(rank_values(n, r));
      for (size_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += double(sent[r][i]);
        EXPECT_EQ(out[0][i], float(sum / world)) << i;
        nonzero += out[0][i] != 0;
        for (int r = 0; r < world; ++r) EXPECT_EQ(e1s[r][i], xs[size_t(r)][i] - sent[r][i]) << i;
      }
      EXPECT_GE(nonzero, sync::topk_count(n, t));
      EXPECT_LE(nonzero, size_t(world) * sync::topk_count(n, t));
      const int64_t b = int64_t(sync::topk_bytes(n, t));
      EXPECT_EQ(sync::sparse_bytes(t, n, world), (world * b + 1) / 2);
      EXPECT_LT(sync::sparse_bytes(t, n, 2), int64_t(0.03 * 4 * n));
    }
  }
}

namespace {

struct Run {
  std::vector<std::vector<float>> final;  // per rank
};

Run train_ranks(const std::string& policy, int world, int steps, const std::string& model = "mlp",
          std::vector<std::vector<std::vector<float>>>* after_sync = nullptr) {
  ops::set_threads(1);
  auto proto = models::make_model(model, 5);
  Run out;
  out.final.resize(world);
  std::mutex mu;
  run_ranks(world, [&](int r, Backend& be) {
    auto m = models::make_model(model, 5);
    optim::Optimizer opt({}, *m);
    auto o = engine_options(policy);
    o.check_collectives = true;
    auto e = sync::make_layer_sync(o, *m, opt, be);
    Rng rng(77 + uint64_t(r));
    for (int s = 0; s < steps; ++s) {
      models::Input in;
      const int64_t b = 4;
      int64_t per = 1;
      for (auto d : m->input_shape()) per *= d;
      std::vector<float> x(static_cast<size_t>(b * per));
      for (auto& v : x) v = rng.uniform() - 0.5f;
      std::vector<int32_t> y(static_cast<size_t>(b));
      for (auto& v : y) v = int32_t(rng.next() % uint64_t(m->num_classes()));
      in.n = b;
      in.x = x.data();
      in.y = y.data();
      engine_step(*m, opt, e->step, in, s, 0.05f, [&] {
        if (after_sync) {
          std::lock_guard<std::mutex> g(mu);
          (*after_sync)[size_t(r)].push_back(snapshot(*m));
        }
      });
    }
    e->control.finalize();
    out.final[size_t(r)] = snapshot(*m);
  });
  return out;
}

}  // namespace

TEST(TransformedMerge, DefaultsAreTodayBitwiseAndOuterLrOneIsAveraging) {
  const auto today = train_ranks("plsgd:h=2", 2, 8);
  const auto defaults = train_ranks("plsgd:h=2,outer=avg,compress=none,delay=0", 2, 8);
  EXPECT_EQ(0, std::memcmp(today.final[0].data(), defaults.final[0].data(), 4 * today.final[0].size()));
  const auto outer1 = train_ranks("plsgd:h=2,outer=nesterov:lr=1,momentum=0", 2, 8);
  const auto outer7 = train_ranks("plsgd:h=2,outer=nesterov", 2, 8);
  double d1 = 0, d7 = 0, scale = 0;
  for (size_t i = 0; i < today.final[0].size(); ++i) {
    d1 = std::max(d1, double(std::fabs(outer1.final[0][i] - today.final[0][i])));
    d7 = std::max(d7, double(std::fabs(outer7.final[0][i] - today.final[0][i])));
    scale = std::max(scale, double(std::fabs(today.final[0][i])));
  }
  // One rounding of anchor - avg per sync, 4 syncs per layer, carried through 8 steps of lr 0.05: a few ulps of the
  // largest parameter (measured ~1e-7 relative); a real outer step moves the model by far more.
  EXPECT_LT(d1, 64 * scale * std::ldexp(1.0, -23));
  EXPECT_GT(d7, 1000 * d1 + 1e-6);
  for (auto* r : {&outer1, &outer7})
    EXPECT_EQ(0, std::memcmp(r->final[0].data(), r->final[1].data(), 4 * r->final[0].size()));
}

void synced_layers_equal(const std::string& spec);

// Right after the sync of a layer its parameters (compressed delta, outer step) and BatchNorm buffers are bitwise
// equal on all ranks; the other layers differ.
TEST(TransformedMerge, SyncedLayersAreBitwiseEqualRightAfterTheirSync) {
  for (const std::string spec : {"plsgd:h=3,compress=int8,outer=nesterov", "plsgd:h=3,compress=topk:p=1,outer=nesterov",
                                 "plsgd:h=3,compress=topk:p=5,values=int8"})
    synced_layers_equal(spec);
}

void synced_layers_equal(const std::string& spec) {
  SCOPED_TRACE(spec);
  const int world = 3, H = 3;
  std::vector<std::vector<std::vector<float>>> after(world);
  train_ranks(spec, world, 2 * H, "cnn", &after);
  auto proto = models::make_model("cnn", 5);
  auto policy = sync::make_policy(sync::PolicySpec::parse(spec));
  std::vector<sync::LayerMeta> meta;
  for (auto* l : proto->layers()) meta.push_back({l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
  policy->setup(meta, world);
  int synced = 0, local = 0;
  for (int s = 1; s < 2 * H; ++s)
    for (auto* l : proto->layers()) {
      bool eq = true;
      for (int r = 1; r < world; ++r)
        eq &= 0 == std::memcmp(after[0][s].data() + l->param_offset(), after[r][s].data() + l->param_offset(),
                               4 * l->num_params());
      if (policy->decide(l->index(), s) == sync::Action::AverageParams) {
        EXPECT_TRUE(eq) << l->name << " step " << s;
        ++synced;
      } else {
        EXPECT_FALSE(eq) << l->name << " step " << s;
        ++local;
      }
    }
  EXPECT_GT(synced, proto->num_layers());
  EXPECT_GT(local, 0);
}

// The engine checks the hook contract at run time: a backward that never reports a layer, or reports one out of
// backward order, fails loudly on that rank instead of silently skipping (or reordering) a collective.
TEST(LayerSyncHook, MissingOrOutOfOrderLayerReportsFail) {
  ops::set_threads(1);
  run_ranks(1, [&](int, Backend& be) {
    auto m = models::make_model("mlp", 1);
    optim::Optimizer opt({}, *m);
    auto e = sync::make_layer_sync(engine_options("ddp"), *m, opt, be);
    std::vector<float> x(size_t(4 * 784), 0.1f);
    std::vector<int32_t> y(4, 1);
    models::Input in;
    in.n = 4;
    in.x = x.data();
    in.y = y.data();
    e->step.begin(0);
    m->forward(in, true);
    e->step.prepare_for_backward();
    m->backward(nullptr);  // the hook is never called
    EXPECT_THROW(e->step.finalize_backward(/*immediate=*/false), std::logic_error);
    e->step.begin(1);
    EXPECT_THROW(e->step.on_layer_ready(0), std::logic_error);  // layer 0 is the last one backward reaches
  });
}
