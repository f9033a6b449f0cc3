// bench_model_step: one process, one fixed synthetic batch, the training step of a reference model on the CPU
// (forward + backward + SGD momentum 0.9 update of every layer, as the PyTorch peer's step), timed after warm-up.
// Prints the median step and its forward / backward / update parts, the layers whose backward took longest
// (from the backward hook's timestamps), and a last JSON line.
//
//   bench_model_step [--model resnet18] [--batch 32] [--warmup 3] [--iters 10] [--threads 1] [--top 8]
//
// Needs no dataset: any model spec, any input shape (what `dreamddp train --data synthetic` times, less the data
// path and the sync engine).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/models/model.h"
#include "core/ops/ops.h"
#include "core/optim/optimizer.h"
#include "core/tensor/rng.h"

namespace {

using namespace dd;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Args {
  std::string model = "resnet18";
  int64_t batch = 32;
  int warmup = 3, iters = 10, threads = 1, top = 8;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::printf("usage: bench_model_step [--model SPEC] [--batch N] [--warmup N] [--iters N] [--threads N] "
                  "[--top N]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError("option " + k + " needs a value");
    const std::string v = argv[++i];
    try {
      if (k == "--model") a.model = v;
      else if (k == "--batch") a.batch = std::stoll(v);
      else if (k == "--warmup") a.warmup = std::stoi(v);
      else if (k == "--iters") a.iters = std::stoi(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--top") a.top = std::stoi(v);
      else throw UsageError("unknown option " + k + " (expected --model, --batch, --warmup, --iters, --threads, --top)");
    } catch (const std::logic_error&) {
      throw UsageError("option " + k + ": '" + v + "' is not a number");
    }
  }
  if (a.batch < 1 || a.warmup < 0 || a.iters < 1 || a.threads < 1 || a.top < 0)
    throw UsageError("--batch, --iters and --threads must be >= 1, --warmup and --top >= 0");
  return a;
}

// Backward-hook timestamps: the time each layer's gradient became final, since the previous layer's.
struct TimingHook : nn::BackwardHook {
  Clock::time_point last;
  std::vector<double> ms;
  void on_layer_ready(int i) override {
    const auto now = Clock::now();
    ms[size_t(i)] += std::chrono::duration<double, std::milli>(now - last).count();
    last = now;
  }
};

int run(const Args& a) {
  ops::set_threads(a.threads);
  auto m = models::make_model(a.model, 1);
  optim::OptimConfig oc;  // SGD, momentum 0.9: the PyTorch peer's optimizer
  oc.kind = optim::OptimizerKind::Sgd;
  oc.momentum = 0.9f;
  optim::Optimizer opt(oc, *m);
  int64_t per = 1;
  for (int64_t d : m->input_shape()) per *= d;
  Rng rng(7);
  std::vector<float> x(size_t(a.batch * per));
  std::vector<int32_t> tok(m->takes_tokens() ? x.size() : 0), y(size_t(a.batch * m->targets_per_sample()));
  for (auto& v : x) v = rng.normal();
  for (auto& v : tok) v = int32_t(rng.next() % uint64_t(m->num_classes()));
  for (auto& v : y) v = int32_t(rng.next() % uint64_t(m->num_classes()));
  models::Input in;
  in.n = a.batch;
  in.y = y.data();
  if (m->takes_tokens()) in.tokens = tok.data();
  else in.x = x.data();

  TimingHook hook;
  hook.ms.assign(size_t(m->num_layers()), 0.0);
  std::vector<double> step, fwd, bwd, upd;
  float loss = 0;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    const bool timed = i >= a.warmup;
    if (i == a.warmup) std::fill(hook.ms.begin(), hook.ms.end(), 0.0);
    const auto t0 = Clock::now();
    loss = m->forward(in, true).loss;
    const double f = ms_since(t0);
    const auto t1 = Clock::now();
    hook.last = t1;
    m->backward(&hook, 1.0f);
    const double b = ms_since(t1);
    const auto t2 = Clock::now();
    for (int l = m->num_layers() - 1; l >= 0; --l) opt.update_layer(l, 0.01f);
    const double u = ms_since(t2), s = ms_since(t0);
    if (timed) step.push_back(s), fwd.push_back(f), bwd.push_back(b), upd.push_back(u);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double ms = median(step), mf = median(fwd), mb = median(bwd), mu = median(upd);
  std::printf("# bench_model_step: model %s (%lld parameters), batch %lld, %d thread(s), %d warm-up + %d timed "
              "steps, SGD momentum 0.9, final loss %.4f\n",
              a.model.c_str(), (long long)m->num_params(), (long long)a.batch, a.threads, a.warmup, a.iters, loss);
  std::printf("%-28s %10s %10s %10s %10s\n", "model", "step_ms", "fwd_ms", "bwd_ms", "update_ms");
  std::printf("%-28s %10.2f %10.2f %10.2f %10.2f\n", a.model.c_str(), ms, mf, mb, mu);
  if (a.top > 0) {
    std::vector<int> order(size_t(m->num_layers()));
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::sort(order.begin(), order.end(), [&](int p, int q) { return hook.ms[size_t(p)] > hook.ms[size_t(q)]; });
    std::printf("# slowest backward layers (mean ms per step, from the hook: time since the previous layer)\n");
    for (int i = 0; i < std::min<int>(a.top, int(order.size())); ++i) {
      const nn::Layer* l = m->layers()[size_t(order[size_t(i)])];
      std::printf("#   %-26s %-9s %8.2f\n", l->name.c_str(), l->kind(), hook.ms[size_t(order[size_t(i)])] / a.iters);
    }
  }
  std::printf("{\"bench\": \"model_step\", \"model\": \"%s\", \"batch\": %lld, \"threads\": %d, \"iters\": %d, "
              "\"step_ms\": %.3f, \"forward_ms\": %.3f, \"backward_ms\": %.3f, \"update_ms\": %.3f}\n",
              a.model.c_str(), (long long)a.batch, a.threads, a.iters, ms, mf, mb, mu);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const dd::UsageError& e) {
    std::fprintf(stderr, "bench_model_step: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model_step: %s\n", e.what());
    return 1;
  }
}
