// Units of `dreamddp launch --max-restarts` (docs/elastic.md): which commands may restart, the command a restart
// runs, and the newest complete checkpoint generation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "app/launch/launch.h"

namespace {

TEST(ElasticRestart, PlanNeedsTrainWithCheckpointsAndOut) {
  using dd::launch::plan_restarts;
  const std::vector<std::string> ok = {"train", "--out", "d", "--checkpoint-every", "5"};
  EXPECT_EQ(plan_restarts(ok, ok).dir, "d");
  EXPECT_THROW(plan_restarts({"bench", "allreduce"}, {}), dd::UsageError);
  EXPECT_THROW(plan_restarts({"train", "--out", "d"}, {}), dd::UsageError);
  EXPECT_THROW(plan_restarts({"train", "--out", "d", "--checkpoint-every", "0"}, {}), dd::UsageError);
  EXPECT_THROW(plan_restarts({"train", "--checkpoint-every", "5"}, {}), dd::UsageError);
  EXPECT_EQ(plan_restarts({"train", "--resume", "r", "--checkpoint-every", "5"}, {}).dir, "r");
}

TEST(ElasticRestart, RestartCommandResumesTheRunDirectory) {
  using dd::launch::restart_argv;
  dd::launch::RestartPlan p;
  p.dir = "d";
  p.argv = {"/bin/dd", "train", "--resume", "old", "--out", "d", "--overwrite", "--checkpoint-every", "5"};
  EXPECT_EQ(restart_argv(p, 9), (std::vector<std::string>{"/bin/dd", "train", "--out", "d", "--checkpoint-every", "5",
                                                          "--resume", "d"}));
  // No complete checkpoint: the original command again; a fresh start over the failed attempt's own output.
  p.argv = {"/bin/dd", "train", "--out", "d", "--checkpoint-every", "5"};
  EXPECT_EQ(restart_argv(p, -1), (std::vector<std::string>{"/bin/dd", "train", "--out", "d", "--checkpoint-every",
                                                           "5", "--overwrite"}));
  p.argv = {"/bin/dd", "train", "--resume", "old", "--out", "d", "--checkpoint-every", "5"};
  EXPECT_EQ(restart_argv(p, -1), p.argv);
}

TEST(ElasticRestart, NoCompleteCheckpointInAnEmptyDirectory) {
  EXPECT_EQ(dd::launch::newest_complete_checkpoint("/nonexistent/dir", 2), -1);
}

}  // namespace
