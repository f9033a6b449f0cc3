// resolve_rendezvous / launcher_job_id: precedence (flag, env, fallback directory) and per-job store directories.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/backend.h"

namespace dd {
namespace {

const char* kVars[] = {"DREAMDDP_RENDEZVOUS", "DREAMDDP_JOB", "SLURM_JOB_ID", "SLURM_STEP_ID",
                       "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};

class Rendezvous : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto v : kVars) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(Rendezvous, FlagThenEnvironmentThenRunDirectory) {
  EXPECT_EQ(resolve_rendezvous("", ""), "");
  EXPECT_EQ(resolve_rendezvous("", "/runs/a"), "file:///runs/a/.rendezvous");
  setenv("DREAMDDP_RENDEZVOUS", "redis://h:1", 1);
  EXPECT_EQ(resolve_rendezvous("", "/runs/a"), "redis://h:1");
  EXPECT_EQ(resolve_rendezvous("file:///x", "/runs/a"), "file:///x");
}

TEST_F(Rendezvous, EachLaunchersJobGetsItsOwnStoreDirectory) {
  setenv("TORCHELASTIC_RUN_ID", "none", 1);  // torchrun's default: not an id
  EXPECT_EQ(launcher_job_id(), "");
  setenv("TORCHELASTIC_RUN_ID", "exp7", 1);
  EXPECT_EQ(launcher_job_id(), "torchrun-exp7");
  setenv("PMIX_NAMESPACE", "99", 1);
  EXPECT_EQ(launcher_job_id(), "pmix-99");
  setenv("OMPI_MCA_ess_base_jobid", "332660737", 1);
  EXPECT_EQ(launcher_job_id(), "ompi-332660737");
  setenv("SLURM_JOB_ID", "4411", 1);
  EXPECT_EQ(launcher_job_id(), "slurm-4411");
  setenv("SLURM_STEP_ID", "2", 1);
  EXPECT_EQ(resolve_rendezvous("", "/runs/a"), "file:///runs/a/.rendezvous/slurm-4411.2");
  setenv("DREAMDDP_JOB", "../my job", 1);  // never escapes the store directory
  EXPECT_EQ(launcher_job_id(), "job-.._my_job");
  EXPECT_EQ(resolve_rendezvous("", "/runs/a"), "file:///runs/a/.rendezvous/job-.._my_job");
}

}  // namespace
}  // namespace dd
