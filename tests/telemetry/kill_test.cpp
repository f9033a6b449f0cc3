// Crash safety: a writer SIGKILLed at arbitrary moments leaves a file h5py/h5dump open, holding a gap-free prefix.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/telemetry/hdf5_types.h"
#include "core/telemetry/metrics_writer.h"
#include "tests/telemetry/test_util.h"

namespace dd::telemetry {
namespace {

using testing::read_table;
using testing::ScratchDir;

// Shared with the child: what it appended and what the writer reported as published.
struct Progress {
  std::atomic<int64_t> appended{0};
  std::atomic<int64_t> published{0};
};

double loss_of(int64_t i) { return 1.0 + 1.0 / static_cast<double>(i + 1); }

[[noreturn]] void child_main(const std::string& path, Progress* pr) {
  try {
    MetricsWriter w(path, {0.2, false, true});
    w.set_attributes({{"policy", "ddp"}});
    for (int64_t i = 0;; ++i) {
      StepRow r;
      r.step = i;
      r.loss = loss_of(i);
      r.wall_time_s = static_cast<double>(i);
      w.append_step(r);
      w.append_sync_event({i, 0, 3, SyncAction::kAllreduceGrads, 0, 0, 4096, 0.0, 0.001});
      pr->appended.store(i + 1);
      pr->published.store(w.stats().steps);
      // ~50k rows/s: enough that flushes carry real work and the kill often lands inside one.
      if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  } catch (...) {
    ::_exit(1);
  }
}

void kill_and_check(double kill_after_s) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  auto* pr = static_cast<Progress*>(
      ::mmap(nullptr, sizeof(Progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(pr, MAP_FAILED);
  new (pr) Progress();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) child_main(path, pr);
  std::this_thread::sleep_for(std::chrono::duration<double>(kill_after_s));
  int64_t published_before_kill = pr->published.load();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with status " << status;
  int64_t appended = pr->appended.load();
  ::munmap(pr, sizeof(Progress));

  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open killed file"));
  Hid mem = step_mem_type();
  auto steps = read_table<StepRow>(f, "steps", mem);
  ASSERT_GE(static_cast<int64_t>(steps.size()), published_before_kill) << "a published flush went missing";
  ASSERT_GT(published_before_kill, 0) << "no flush completed in " << kill_after_s << " s";
  ASSERT_LE(static_cast<int64_t>(steps.size()), appended);
  for (size_t i = 0; i < steps.size(); ++i) {
    ASSERT_EQ(steps[i].step, static_cast<int64_t>(i)) << "gap at row " << i;
    ASSERT_DOUBLE_EQ(steps[i].loss, loss_of(static_cast<int64_t>(i)));
  }
  std::printf("killed after %.2f s: %lld rows appended, %lld published before the kill, %zu in the file\n",
              kill_after_s, static_cast<long long>(appended), static_cast<long long>(published_before_kill),
              steps.size());
  Hid emem = sync_event_mem_type();
  auto sync = read_table<SyncEventRow>(f, "sync_events", emem);
  // One flush drains every table under one lock, and the child appends step i before its sync event i, so a
  // snapshot holds either both or only the step row: never a sync event without its step, never a gap.
  EXPECT_TRUE(sync.size() == steps.size() || sync.size() + 1 == steps.size())
      << sync.size() << " sync events vs " << steps.size() << " steps";
  for (size_t i = 0; i < sync.size(); ++i) ASSERT_EQ(sync[i].step, static_cast<int64_t>(i)) << "sync gap at " << i;

  std::string py = std::string(DD_PYTHON) + " " + DD_SCHEMA_CHECK + " prefix " + path + " " +
                   std::to_string(steps.size());
  EXPECT_EQ(std::system(py.c_str()), 0) << py;
  std::string dump = "h5dump -H " + path + " > /dev/null";
  EXPECT_EQ(std::system(dump.c_str()), 0) << dump;
}

TEST(MetricsWriterKill, SigkillLeavesReadablePrefix) {
  // Several kill times so the signal lands at different points of the flush cycle (0.2 s period).
  for (double t : {1.5, 0.73, 1.11}) {
    SCOPED_TRACE("kill after " + std::to_string(t) + " s");
    kill_and_check(t);
  }
}

}  // namespace
}  // namespace dd::telemetry
