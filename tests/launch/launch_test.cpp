// Multi-rank tests of `dreamddp launch` with external programs: environment per rank, failure propagation,
// sibling take-down in bounded time, signal forwarding, sub-command dispatch and usage errors.
#include <gtest/gtest.h>

#include <set>

#include "tests/launch/launch_test_util.h"

namespace dd::launch::test {
namespace {

TEST(Launch, EveryRankGetsTorchrunEnvironment) {
  TmpDir dir;
  Launcher l({"-n", "3", "--", "/bin/sh", "-c",
              "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $GLOO_SOCKET_IFNAME\" > " +
                  dir.path + "/out.$RANK; echo \"$DREAMDDP_RENDEZVOUS\" > " + dir.path + "/rdzv.$RANK; echo " +
                  "\"$MASTER_PORT\" > " + dir.path + "/port.$RANK"},
             dir / "err");
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 0) << l.stderr_text();
  for (int r = 0; r < 3; ++r) {
    const std::string rs = std::to_string(r);
    EXPECT_EQ(read_file(dir / ("out." + rs)), rs + " 3 " + rs + " 3 127.0.0.1 lo");
    EXPECT_EQ(read_file(dir / ("rdzv." + rs)), read_file(dir / "rdzv.0"));
    EXPECT_EQ(read_file(dir / ("port." + rs)), read_file(dir / "port.0"));
  }
  const std::string rdzv = read_file(dir / "rdzv.0");
  ASSERT_EQ(rdzv.rfind("file:///", 0), 0u) << rdzv;
  EXPECT_FALSE(exists(rdzv.substr(7))) << "the launcher's rendezvous directory must be removed at the end";
  const int port = std::stoi(read_file(dir / "port.0"));
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

TEST(Launch, ExplicitRendezvousIsPassedThroughAndKept) {
  TmpDir dir;
  const std::string url = "file://" + dir.path + "/store";
  Launcher l({"-n", "2", "--rendezvous", url, "--master-port", "31234", "--", "/bin/sh", "-c",
              "echo \"$DREAMDDP_RENDEZVOUS $MASTER_PORT\" > " + dir.path + "/rdzv.$RANK"},
             dir / "err");
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 0) << l.stderr_text();
  EXPECT_EQ(read_file(dir / "rdzv.0"), url + " 31234");
  EXPECT_EQ(read_file(dir / "rdzv.1"), url + " 31234");
}

TEST(Launch, FailingRankExitStatusAndSiblingsKilledQuickly) {
  TmpDir dir;
  // Ranks 0 and 2 sleep in a background child (same process group) and record both pids; rank 1 fails.
  const std::string script = "if [ \"$RANK\" = 1 ]; then while [ ! -e " + dir.path + "/bg.0 ] || [ ! -e " +
                             dir.path + "/bg.2 ]; do sleep 0.02; done; exit 7; fi; sleep 30 & echo $! > " +
                             dir.path + "/bg.tmp.$RANK; echo $$ > " + dir.path + "/sh.$RANK; mv " + dir.path +
                             "/bg.tmp.$RANK " + dir.path + "/bg.$RANK; wait";
  Launcher l({"-n", "3", "--", "/bin/sh", "-c", script}, dir / "err");
  ASSERT_TRUE(l.wait(20)) << "launcher hung";
  EXPECT_EQ(l.status, 7) << l.stderr_text();
  EXPECT_LT(l.elapsed, 5.0) << "siblings must be taken down promptly (SIGTERM), not after their sleep";
  const std::string err = l.stderr_text();
  EXPECT_NE(err.find("rank 1 "), std::string::npos) << err;
  EXPECT_NE(err.find("status 7"), std::string::npos) << err;
  for (int r : {0, 2}) {
    const std::string rs = std::to_string(r);
    const pid_t bg = std::stoi(read_file(dir / ("bg." + rs)));
    const pid_t sh = std::stoi(read_file(dir / ("sh." + rs)));
    EXPECT_TRUE(pid_gone_within(sh, 2.0)) << "rank " << r << " survived";
    EXPECT_TRUE(pid_gone_within(bg, 2.0)) << "rank " << r << "'s child process survived";
  }
}

TEST(Launch, RankKilledBySignalGives128PlusSignal) {
  TmpDir dir;
  Launcher l({"-n", "2", "--", "/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi; exec sleep 30"},
             dir / "err");
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 128 + SIGKILL) << l.stderr_text();
  EXPECT_LT(l.elapsed, 5.0);
  EXPECT_NE(l.stderr_text().find("rank 1 "), std::string::npos) << l.stderr_text();
  EXPECT_NE(l.stderr_text().find("signal 9"), std::string::npos) << l.stderr_text();
}

TEST(Launch, RankIgnoringSigtermIsKilledAfterGrace) {
  TmpDir dir;
  Launcher l({"-n", "2", "--grace", "1", "--", "/bin/sh", "-c",
              "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 3; fi; trap '' TERM; sleep 30"},
             dir / "err");
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 3) << l.stderr_text();
  EXPECT_GT(l.elapsed, 1.0) << "SIGKILL must wait for the grace period";
  EXPECT_LT(l.elapsed, 5.0);
  EXPECT_NE(l.stderr_text().find("SIGKILL"), std::string::npos) << l.stderr_text();
}

TEST(Launch, ForwardsSigtermToEveryRank) {
  TmpDir dir;
  Launcher l({"-n", "2", "--", "/bin/sh", "-c",
              "trap 'echo term > " + dir.path + "/sig.$RANK; exit 0' TERM; touch " + dir.path +
                  "/ready.$RANK; while :; do sleep 0.05; done"},
             dir / "err");
  ASSERT_TRUE(wait_for_files({dir / "ready.0", dir / "ready.1"}, 10));
  kill(l.pid, SIGTERM);
  ASSERT_TRUE(l.wait(20));
  // Both ranks handled the forwarded signal and exited 0, so the launcher reports its own signal.
  EXPECT_EQ(l.status, 128 + SIGTERM) << l.stderr_text();
  EXPECT_EQ(read_file(dir / "sig.0"), "term");
  EXPECT_EQ(read_file(dir / "sig.1"), "term");
  EXPECT_LT(l.elapsed, 10.0);
}

TEST(Launch, SigintStopsRanksAndExits130) {
  TmpDir dir;
  Launcher l({"-n", "3", "--", "/bin/sh", "-c", "touch " + dir.path + "/ready.$RANK; exec sleep 30"}, dir / "err");
  ASSERT_TRUE(wait_for_files({dir / "ready.0", dir / "ready.1", dir / "ready.2"}, 10));
  const double t0 = now_s();
  kill(l.pid, SIGINT);
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 128 + SIGINT) << l.stderr_text();
  EXPECT_LT(now_s() - t0, 3.0);
  EXPECT_NE(l.stderr_text().find("forwarding"), std::string::npos) << l.stderr_text();
}

TEST(Launch, SecondInterruptKillsWithoutGrace) {
  TmpDir dir;
  Launcher l({"-n", "2", "--grace", "30", "--", "/bin/sh", "-c",
              "trap '' INT TERM; touch " + dir.path + "/ready.$RANK; sleep 30"},
             dir / "err");
  ASSERT_TRUE(wait_for_files({dir / "ready.0", dir / "ready.1"}, 10));
  const double t0 = now_s();
  kill(l.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(l.pid, SIGINT);
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 128 + SIGKILL) << l.stderr_text();
  EXPECT_LT(now_s() - t0, 5.0) << "a second interrupt must not wait for the 30 s grace";
}

TEST(Launch, SubcommandsRunTheDreamddpBinary) {
  TmpDir dir;
  // Stand-in for the dreamddp binary: records the arguments it was started with.
  write_file(dir / "fake-dreamddp", "#!/bin/sh\necho \"$@\" > " + dir.path + "/args.$RANK\n");
  chmod((dir / "fake-dreamddp").c_str(), 0755);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    LaunchOptions o;
    o.nprocs = 2;
    o.self_exe = dir / "fake-dreamddp";
    int rc = 1;
    try {
      rc = run(o, {"bench", "allreduce", "--iters", "3"});
    } catch (...) {
    }
    _exit(rc);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(read_file(dir / "args.0"), "bench allreduce --iters 3");
  EXPECT_EQ(read_file(dir / "args.1"), "bench allreduce --iters 3");
}

TEST(Launch, ProgramIsFoundOnPath) {
  TmpDir dir;
  Launcher l({"-n", "2", "--", "sh", "-c", "echo $RANK > " + dir.path + "/r.$RANK"}, dir / "err");
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 0) << l.stderr_text();
  EXPECT_EQ(read_file(dir / "r.1"), "1");
}

TEST(Launch, UsageErrorsExit2) {
  TmpDir dir;
  // Arguments after "launch", and a piece of the one-line message that must name the problem.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--", "/bin/true"}, "missing -n"},
      {{"-n", "0", "--", "/bin/true"}, "-n: bad value '0'"},
      {{"-n", "2", "--"}, "nothing to run"},
      {{"-n", "2", "--netem", "fast", "--", "/bin/true"}, "bad rate 'fast'"},
      {{"-n", "2", "--", "/nonexistent/program"}, "cannot run '/nonexistent/program'"},
      {{"-n", "2", "--", "no-such-program-dd"}, "cannot run 'no-such-program-dd'"},
      {{"-n", "3", "--nodes", "2x2", "--", "/bin/true"}, "-n 3 does not match --nodes 2x2"},
      {{"--nodes", "2", "x", "2", "-n", "5", "--", "/bin/true"}, "-n 5 does not match --nodes 2x2"},
      {{"--nodes", "2", "--", "/bin/true"}, "--nodes: bad value '2'"},
  };
  for (const auto& [args, message] : cases) {
    Launcher l(args, dir / "err");
    ASSERT_TRUE(l.wait(20));
    EXPECT_EQ(l.status, 2) << message << ": " << l.stderr_text();
    EXPECT_NE(l.stderr_text().find(message), std::string::npos) << l.stderr_text();
    EXPECT_EQ(l.stderr_text().find('\n'), std::string::npos) << "one line: " << l.stderr_text();
  }
}

TEST(Launch, NetemWithoutRootIsUsageError) {
  TmpDir dir;
  // As root, drop to nobody in the launcher's process; otherwise we already are not root.
  Launcher l({"-n", "2", "--netem", "1gbit", "--", "/bin/true"}, dir / "err", geteuid() == 0 ? 65534 : -1);
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 2) << l.stderr_text();
  EXPECT_NE(l.stderr_text().find("root"), std::string::npos) << l.stderr_text();
}

// Each rank records its environment and the host name it sees.
std::vector<std::string> node_report_args(const std::string& dir) {
  return {"--", "/bin/sh", "-c",
          "echo \"$RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $DREAMDDP_NODE $GROUP_RANK $WORLD_SIZE $MASTER_ADDR "
          "$GLOO_SOCKET_IFNAME $(uname -n)\" > " + dir + "/node.$RANK"};
}

TEST(Launch, NodesWithoutNetemSetNodeEnvironmentAndHostNames) {
  if (geteuid() != 0) GTEST_SKIP() << "host names per node need root (UTS namespaces)";
  TmpDir dir;
  std::vector<std::string> args = {"--nodes", "2", "x", "3"};
  const auto cmd = node_report_args(dir.path);
  args.insert(args.end(), cmd.begin(), cmd.end());
  Launcher l(args, dir / "err");
  ASSERT_TRUE(l.wait(20));
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  for (int r = 0; r < 6; ++r) {
    const std::string node = std::to_string(r / 3);
    EXPECT_EQ(read_file(dir / ("node." + std::to_string(r))),
              std::to_string(r) + " " + std::to_string(r % 3) + " 3 " + node + " " + node +
                  " 6 127.0.0.1 lo ddnode" + node);
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(std::string(host).rfind("ddnode", 0), std::string::npos) << "the launcher's own host name is untouched";
}

TEST(Launch, NodesWithoutRootKeepTheHostNameAndWarn) {
  TmpDir dir;
  std::vector<std::string> args = {"--nodes", "2x1"};
  const auto cmd = node_report_args(dir.path);
  args.insert(args.end(), cmd.begin(), cmd.end());
  Launcher l(args, dir / "err", geteuid() == 0 ? 65534 : -1);
  ASSERT_TRUE(l.wait(20));
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  EXPECT_NE(l.stderr_text().find("hier:nodes=AxB"), std::string::npos) << l.stderr_text();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(read_file(dir / "node.0"), "0 0 1 0 0 2 127.0.0.1 lo " + std::string(host));
  EXPECT_EQ(read_file(dir / "node.1"), "1 0 1 1 1 2 127.0.0.1 lo " + std::string(host));
}

}  // namespace
}  // namespace dd::launch::test
