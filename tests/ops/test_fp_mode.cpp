// Subnormals flushed or kept (base/fp_mode.h) on every kind of thread that computes: the main thread, OpenMP's
// workers (which are oneDNN's: its CPU runtime must be OpenMP), and a backend's communication thread (CommQueue,
// where Gloo's and MPI's reductions run). Each reads its own MXCSR back. The pool and the communication thread are
// started in the other mode first, so that neither inheritance nor the default can pass for the setting. A oneDNN
// GEMM whose every product is subnormal then gives zeros when flushed and non-zeros when kept. Skipped on CPUs
// without MXCSR.
#include <gtest/gtest.h>
#include <omp.h>

#include <dnnl.hpp>
#include <vector>

#include "backends/common/comm_queue.h"
#include "base/fp_mode.h"
#include "core/ops/ops.h"

using namespace dd;

namespace {

// 0 flush, 1 keep, -1 FTZ and DAZ disagree (or no MXCSR).
int mode_here() {
  Subnormals s;
  if (!subnormals_here(&s)) return -1;
  return s == Subnormals::flush ? 0 : 1;
}
int code(Subnormals s) { return s == Subnormals::flush ? 0 : 1; }

// The mode of every thread of an OpenMP team of n (the thread that forks it included).
std::vector<int> team_modes(int n) {
  std::vector<int> out(size_t(n), -2);
#pragma omp parallel num_threads(n)
  out[size_t(omp_get_thread_num())] = mode_here();
  return out;
}

// C = A B with every A and B entry 1e-20: each product is 1e-40, below the smallest normal float (1.2e-38).
// Returns how many entries of C are non-zero.
int64_t subnormal_gemm_nonzeros() {
  const int64_t M = 192, N = 256, K = 4;
  std::vector<float> A(size_t(M * K), 1e-20f), B(size_t(K * N), 1e-20f), C(size_t(M * N), -1.0f);
  ops::gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
  int64_t nz = 0;
  for (float c : C) nz += c != 0.0f;
  return nz;
}

class Subnormals_ : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!subnormals_settable()) GTEST_SKIP() << "no MXCSR on this CPU: the mode cannot be set";
  }
  void TearDown() override { ops::set_subnormals(Subnormals::flush); }
};

TEST_F(Subnormals_, OneDnnRunsOnOpenMpWorkers) {
  EXPECT_EQ(dnnl_version()->cpu_runtime, unsigned(DNNL_RUNTIME_OMP))
      << "oneDNN's CPU threads are not OpenMP's: set_threads/set_subnormals do not reach them";
}

TEST_F(Subnormals_, MainThreadAndOpenMpWorkers) {
  const int n = 3;
  for (Subnormals want : {Subnormals::flush, Subnormals::keep}) {
    const Subnormals other = want == Subnormals::flush ? Subnormals::keep : Subnormals::flush;
    // The pool's workers exist and run in the other mode.
    subnormals_mode = other;
    set_subnormals_here(other);
    ops::set_threads(n);
    for (int m : team_modes(n)) ASSERT_EQ(m, code(other));
    ops::set_subnormals(want);
    EXPECT_EQ(mode_here(), code(want)) << "main thread, " << subnormals_name(want);
    const std::vector<int> modes = team_modes(n);
    for (int t = 0; t < n; ++t)
      EXPECT_EQ(modes[size_t(t)], code(want)) << "OpenMP thread " << t << ", " << subnormals_name(want);
    const int64_t nz = subnormal_gemm_nonzeros();
    if (want == Subnormals::flush) EXPECT_EQ(nz, 0) << "oneDNN GEMM kept subnormal results while flushing";
    else EXPECT_EQ(nz, 192 * 256) << "oneDNN GEMM flushed subnormal results while keeping them";
    // A later, larger team: its new workers are started with the mode too.
    ops::set_threads(n + 1);
    for (int m : team_modes(n + 1)) EXPECT_EQ(m, code(want)) << "team of " << n + 1;
  }
}

TEST_F(Subnormals_, CommunicationThread) {
  for (Subnormals want : {Subnormals::flush, Subnormals::keep}) {
    ops::set_subnormals(want);
    // The thread that starts the queue runs in the other mode: the queue's thread must take the process's.
    set_subnormals_here(want == Subnormals::flush ? Subnormals::keep : Subnormals::flush);
    CommQueue q("fp-mode-test");
    int seen = -2;
    q.run_sync([&] { seen = mode_here(); });
    EXPECT_EQ(seen, code(want)) << "communication thread, " << subnormals_name(want);
  }
}

}  // namespace
