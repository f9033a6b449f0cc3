// `dreamddp train --device cuda` where it cannot run (a build without CUDA, or no visible device) exits 2 with one
// clear line; where a device is visible this test skips (tests/gpu/test_train_gpu.cpp covers that case).
#include <gtest/gtest.h>

#ifdef DREAMDDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "tests/cli/cli_run.h"

namespace {

bool device_visible() {
#ifdef DREAMDDP_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return false;
  return n > 0;
#else
  return false;
#endif
}

TEST(CudaRefused, TrainDeviceCudaExitsTwoWithOneLine) {
  if (device_visible()) GTEST_SKIP() << "a CUDA device is visible: --device cuda really trains here";
  auto r = dd::cli::test::run_dreamddp({"train", "--device", "cuda", "--data", "synthetic", "--steps", "1"}, 60);
  ASSERT_EQ(r.status, 2) << r.describe();
  auto lines = dd::cli::test::lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.describe();
#ifdef DREAMDDP_HAVE_CUDA
  EXPECT_NE(lines[0].find("no CUDA device"), std::string::npos) << lines[0];
#else
  EXPECT_NE(lines[0].find("no CUDA support"), std::string::npos) << lines[0];
#endif
  EXPECT_NE(lines[0].find("--device cuda"), std::string::npos) << lines[0];
}

TEST(CudaRefused, NcclWithCpuDeviceIsRefused) {
  auto r = dd::cli::test::run_dreamddp({"train", "--backend", "nccl", "--data", "synthetic", "--steps", "1"}, 60,
                                       {"RANK=0", "WORLD_SIZE=2"});
  ASSERT_EQ(r.status, 2) << r.describe();
  EXPECT_NE(r.err.find("--backend nccl"), std::string::npos) << r.describe();
}

}  // namespace
