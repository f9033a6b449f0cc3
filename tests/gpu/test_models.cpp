// Every reference model built for the CUDA kernel table (GpuModel) against the same model on the host (label gpu;
// skipped without a CUDA device): one forward+backward gives the same loss, per-layer gradients and hook order;
// 5 steps of the one optim::Optimizer (state on each model's device) the same parameters.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/models/cuda/gpu_model.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/ops/cuda/device_cuda.h"
#include "core/optim/optimizer.h"
#include "core/tensor/rng.h"

namespace dd {
namespace {

using models::gpu::GpuModel;
using ops::DeviceArray;

struct RecordHook : nn::BackwardHook {
  std::vector<int> order;
  void on_layer_ready(int index) override { order.push_back(index); }
};

// One random batch, on the host for the CPU model and on the device for the GPU model.
struct Batch {
  std::vector<float> x;
  std::vector<int32_t> tokens, y;
  DeviceArray<float> dx{cuops::device()};
  DeviceArray<int32_t> dtokens{cuops::device()}, dy{cuops::device()};
  models::Input host, dev;

  Batch(const models::Model& m, int64_t n, uint64_t seed) {
    Rng rng(seed);
    int64_t per = 1;
    for (int64_t d : m.input_shape()) per *= d;
    const uint64_t classes = uint64_t(m.num_classes());
    y.resize(size_t(n * m.targets_per_sample()));
    for (auto& v : y) v = int32_t(rng.next() % classes);
    host.n = dev.n = n;
    host.y = y.data();
    dy.ensure(y.size());
    DD_CUDA_CHECK(cudaMemcpy(dy.data(), y.data(), y.size() * 4, cudaMemcpyHostToDevice));
    dev.y = dy.data();
    if (m.takes_tokens()) {
      tokens.resize(size_t(n * per));
      for (auto& v : tokens) v = int32_t(rng.next() % classes);
      dtokens.ensure(tokens.size());
      DD_CUDA_CHECK(cudaMemcpy(dtokens.data(), tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice));
      host.tokens = tokens.data();
      dev.tokens = dtokens.data();
    } else {
      x.resize(size_t(n * per));
      for (auto& v : x) v = rng.normal();
      dx.ensure(x.size());
      DD_CUDA_CHECK(cudaMemcpy(dx.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
      host.x = x.data();
      dev.x = dx.data();
    }
  }
};

double norm(const float* a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
  return std::sqrt(s);
}

double diff_norm(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s);
}

struct Case {
  std::string model;
  int64_t batch;
  std::string optimizer;
};

// Names the case in test output (gtest would otherwise print the struct's bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "/" << c.optimizer << "/batch " << c.batch; }

class GpuModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuModelTest, MatchesCpuStepAndUpdates) {
  if (!models::gpu::gpu_available()) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  auto cpu = models::make_model(c.model, 42);
  auto back = models::make_model(c.model, 42);  // receives the GPU's gradients and parameters
  optim::OptimConfig oc;
  oc.kind = c.optimizer;
  oc.momentum = 0.9f;
  oc.weight_decay = 1e-4f;
  GpuModel gpu(*cpu);
  optim::Optimizer opt(oc, *cpu);
  optim::Optimizer gopt(oc, gpu.model());  // the same optimizer, state on the device
  ASSERT_EQ(gpu.num_layers(), cpu->num_layers());
  ASSERT_EQ(gpu.num_params(), cpu->num_params());
  const std::vector<float> initial(cpu->params().data(), cpu->params().data() + cpu->num_params());
  const float lr = c.optimizer == "sgd" ? 0.05f : 1e-3f;

  for (int step = 0; step < 5; ++step) {
    Batch b(*cpu, c.batch, 100 + uint64_t(step));
    auto rc = cpu->forward(b.host, true);
    auto rg = gpu.forward(b.dev, true);
    // The first step starts from identical parameters; later ones from parameters that agree to tolerance.
    const double loss_tol = step == 0 ? 1e-4 : 1e-3;
    EXPECT_NEAR(rg.loss, rc.loss, loss_tol * std::fabs(rc.loss)) << c.model << " step " << step;
    EXPECT_EQ(rg.predictions, rc.predictions);
    EXPECT_LE(std::llabs(rg.correct - rc.correct), std::max<int64_t>(1, rc.predictions / 1000));

    RecordHook hc, hg;
    cpu->backward(&hc, 1.0f);
    gpu.backward(&hg, 1.0f);
    ASSERT_EQ(hg.order, hc.order) << "hook order differs from the CPU model's";
    ASSERT_EQ(int(hg.order.size()), cpu->num_layers());
    for (size_t i = 0; i < hg.order.size(); ++i) EXPECT_EQ(hg.order[i], cpu->num_layers() - 1 - int(i));

    if (step == 0) {
      gpu.model().copy_grads_to(*back);
      for (const nn::Layer* l : cpu->layers()) {
        const int64_t off = l->param_offset(), n = l->num_params();
        const double ref = norm(cpu->grads().data() + off, n);
        ASSERT_GT(ref, 0.0) << l->name << ": CPU gradient is zero, the comparison would prove nothing";
        const double rel = diff_norm(back->grads().data() + off, cpu->grads().data() + off, n) / ref;
        EXPECT_LT(rel, 1e-3) << c.model << " layer " << l->name << " gradient rel. diff " << rel;
      }
    }
    for (int l = cpu->num_layers() - 1; l >= 0; --l) {
      opt.update_layer(l, lr);
      gopt.update_layer(l, lr);
    }
  }

  // After 5 updates: the GPU parameters agree with the CPU's, relative to how far the CPU ones moved.
  gpu.model().copy_params_to(*back);
  gpu.model().copy_grads_to(*back);
  for (const nn::Layer* l : cpu->layers()) {
    const int64_t off = l->param_offset(), n = l->num_params();
    const float* pc = cpu->params().data() + off;
    const double moved = diff_norm(pc, initial.data() + off, n);
    ASSERT_GT(moved, 0.0) << l->name << " did not move on the CPU";
    const double rel = diff_norm(back->params().data() + off, pc, n) / moved;
    EXPECT_LT(rel, 1e-2) << c.model << " layer " << l->name << " parameter diff / movement " << rel;
    EXPECT_EQ(norm(back->grads().data() + off, n), 0.0) << "update_layer must zero " << l->name << "'s gradient";
  }
  // BatchNorm running statistics, updated by 5 training forwards on each side.
  const int64_t nb = int64_t(cpu->buffers().size());
  if (nb > 0) {
    const double rel = diff_norm(back->buffers().data(), cpu->buffers().data(), nb) / norm(cpu->buffers().data(), nb);
    EXPECT_LT(rel, 1e-4) << c.model << " running statistics rel. diff " << rel;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModelTest,
                         ::testing::Values(Case{"mlp", 32, "sgd"}, Case{"gpt-mini", 4, "sgd"}, Case{"cnn", 16, "sgd"},
                                           Case{"resnet20", 16, "sgd"}, Case{"mlp", 32, "adamw"},
                                           Case{"gpt-mini", 2, "adamw"}, Case{"resnet18", 8, "sgd"},
                                           Case{"resnet50:image=16", 8, "sgd"},
                                           Case{"gpt2:layers=2,d=64,heads=4,vocab=300,ctx=32", 2, "adamw"},
                                           Case{"llama:layers=2,d=64,heads=4,ffn=96,vocab=300,ctx=32", 2, "adamw"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string s = i.param.model + "_" + i.param.optimizer;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// Every model has a GPU path: one list of models (models::model_names()), built on the CUDA table as on the host.
TEST(GpuModel, EveryModelBuildsOnTheDevice) {
  if (!models::gpu::gpu_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& name : models::model_names()) {
    auto cpu = models::make_model(name, 1);
    GpuModel g(*cpu);
    EXPECT_EQ(g.num_params(), cpu->num_params()) << name;
    EXPECT_STREQ(g.model().device().name(), "cuda") << name;
  }
}

TEST(GpuModel, ReadyEventsCompleteAfterBackward) {
  if (!models::gpu::gpu_available()) GTEST_SKIP() << "no CUDA device";
  auto cpu = models::make_model("mlp", 3);
  GpuModel gpu(*cpu);
  Batch b(*cpu, 8, 5);
  gpu.forward(b.dev, true);
  gpu.backward(nullptr, 1.0f);
  gpu.synchronize();
  for (int l = 0; l < gpu.num_layers(); ++l) EXPECT_EQ(cudaEventQuery(gpu.layer_ready_event(l)), cudaSuccess);
}

}  // namespace
}  // namespace dd
