// discover_rank(): torchrun, mpirun and Slurm variables, precedence, and malformed values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "base/error.h"

namespace dd {
namespace {

const char* kVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

class DiscoverRank : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto v : kVars) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(DiscoverRank, NothingSetMeansOneProcess) {
  auto i = discover_rank();
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world, 1);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.source, "none");
}

TEST_F(DiscoverRank, Torchrun) {
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  auto i = discover_rank();
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.source, "torchrun");
}

TEST_F(DiscoverRank, MpirunAndTorchrunTakesPrecedence) {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  auto i = discover_rank();
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.world, 4);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.source, "mpirun");
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_EQ(discover_rank().source, "torchrun");
  EXPECT_EQ(discover_rank().local_rank, 1);  // no LOCAL_RANK: the rank itself (single host)
}

TEST_F(DiscoverRank, Slurm) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "6", 1);
  setenv("SLURM_LOCALID", "1", 1);
  auto i = discover_rank();
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.world, 6);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.source, "slurm");
}

TEST_F(DiscoverRank, MalformedValuesAreUsageErrors) {
  setenv("RANK", "x", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_THROW(discover_rank(), UsageError);
  setenv("RANK", "2", 1);
  EXPECT_THROW(discover_rank(), UsageError);  // rank not below world
  unsetenv("WORLD_SIZE");
  setenv("RANK", "0", 1);
  EXPECT_THROW(discover_rank(), UsageError);  // half set
}

TEST_F(DiscoverRank, WorldSizeBesideALauncherMustAgree) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("WORLD_SIZE", "4", 1);  // exported in a batch script: the launcher still places the rank
  EXPECT_EQ(discover_rank().rank, 3);
  EXPECT_EQ(discover_rank().source, "slurm");
  setenv("WORLD_SIZE", "2", 1);
  try {
    discover_rank();
    FAIL() << "WORLD_SIZE=2 under 4 srun tasks was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE=2 disagrees with SLURM_NTASKS=4"), std::string::npos) << e.what();
  }
}

TEST(SlurmTasksOnNode, ExpandsTheStepList) {
  EXPECT_EQ(slurm_tasks_on_node("2(x2)", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x2)", 1), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x2)", 2), -1);
  EXPECT_EQ(slurm_tasks_on_node("3,1", 1), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("x", 0), -1);
  EXPECT_EQ(slurm_tasks_on_node("2(x", 0), -1);
}

}  // namespace
}  // namespace dd
