// Tests of `dreamddp launch --netem` (root + `ip netns` only, skipped otherwise): ranks in their own network
// namespaces reach each other and nothing else, a 100mbit link measures as 100mbit, delay adds latency, with
// --nodes the ranks of a node share a namespace and host name and talk unshaped, and namespaces, veths and the
// bridge are gone after success, failure and SIGINT.
#include <dirent.h>
#include <gtest/gtest.h>

#include <set>

#include "app/netem/sys_command.h"
#include "tests/launch/launch_test_util.h"
#include "tests/launch/netem_test_util.h"

namespace dd::launch::test {
namespace {

TEST(LaunchNetem, RanksReachEachOtherInTheirNamespacesAndAllIsRemoved) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  const auto before = leftovers();
  Launcher l(netprobe_args("1gbit", dir.path, {"echo"}), dir / "err");
  ASSERT_TRUE(l.wait(30));
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  std::istringstream r0(read_file(dir / "r0")), r1(read_file(dir / "r1"));
  std::string if0, ns0, list0, master, peer, if1, ns1, list1, reply, me;
  r0 >> if0 >> ns0 >> list0 >> master >> peer;
  r1 >> if1 >> ns1 >> list1 >> reply >> me;
  EXPECT_EQ(reply, "HELLO");
  EXPECT_EQ(if0, std::string(kPrefix) + "eth0");
  EXPECT_EQ(if1, if0);
  // Only loopback and the rank's own link exist inside its namespace: no path to the outside.
  EXPECT_EQ(list0, "ddteth0,lo");
  EXPECT_EQ(list1, "ddteth0,lo");
  EXPECT_NE(ns0, ns1);
  ASSERT_EQ(master.rfind("10.77.", 0), 0u) << master;
  EXPECT_EQ(master.substr(master.rfind('.')), ".1");
  EXPECT_EQ(peer, master.substr(0, master.rfind('.')) + ".2") << "rank 1 must connect from its own namespace";
  EXPECT_EQ(me, peer);
  EXPECT_FALSE(exists("/run/netns/" + ns0));
  EXPECT_FALSE(exists("/run/netns/" + ns1));
  EXPECT_EQ(leftovers(), before);
}

TEST(LaunchNetem, ShapedLinkRateIsMeasured) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  // Rank 1 streams 5 MB to rank 0, which times it from first to last byte.
  Launcher l(netprobe_args("100mbit", dir.path, {"bulk", "5000000"}), dir / "err");
  ASSERT_TRUE(l.wait(40));
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  std::istringstream in(read_file(dir / "bulk"));
  long bytes = 0;
  double mbit = 0;
  std::string intact;
  in >> bytes >> intact >> mbit;
  EXPECT_EQ(intact, "ok");
  EXPECT_EQ(bytes, 5000000);
  EXPECT_LT(mbit, 130.0) << "the 100mbit shaping is not applied";
  EXPECT_GT(mbit, 50.0) << "the link runs far below its shaped rate";
}

TEST(LaunchNetem, DelayAddsOneWayLatency) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  const auto before = leftovers();
  Launcher l(netprobe_args("1gbit,delay=10ms", dir.path, {"rtt", "15"}), dir / "err");
  ASSERT_TRUE(l.wait(40));
  if (l.status == 2 && l.stderr_text().find("sch_netem") != std::string::npos)
    GTEST_SKIP() << "this kernel has no netem qdisc: " << l.stderr_text();
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  const double rtt = std::stod(read_file(dir / "rtt"));
  EXPECT_GT(rtt, 18.0) << "10 ms each way should give a 20 ms round trip";
  EXPECT_LT(rtt, 40.0);
  EXPECT_EQ(leftovers(), before);
}

// --nodes 2x2: every rank records what it sees; then rank 1 (same node as rank 0) and, after it, rank 2 (the
// other node) each stream to rank 0, which writes the sender's address, the bytes and Mbit/s of each transfer.
const char* kNodesPy = R"PY(
import os, socket, sys, time
d, r = sys.argv[1], int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
ifaces = ",".join(sorted(n for _, n in socket.if_nameindex()))
keys = ["DREAMDDP_NODE", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "DREAMDDP_NETNS", "GLOO_SOCKET_IFNAME"]
open(f"{d}/info.{r}", "w").write(" ".join([socket.gethostname()] + [os.environ[k] for k in keys] + [ifaces]) + "\n")
SAME, CROSS = 20 * 1000 * 1000, 5 * 1000 * 1000
def connect():
    end = time.time() + 15
    while True:
        try:
            return socket.create_connection((addr, port), timeout=5)
        except OSError:
            if time.time() > end: raise
            time.sleep(0.05)
def receive(s, total):
    c, peer = s.accept(); first = len(c.recv(1 << 16)); got = first; t0 = time.time()
    while got < total:
        b = c.recv(1 << 20)
        if not b: break
        got += len(b)
    dt = time.time() - t0; c.close()
    return f"{peer[0]} {got} {8 * (got - first) / dt / 1e6:.1f}"
if r == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port)); s.listen(2)
    same = receive(s, SAME)
    open(f"{d}/same.done", "w").write("")
    cross = receive(s, CROSS)
    open(f"{d}/rates", "w").write(f"{addr} {same} {cross}\n")
elif r == 1:
    c = connect(); c.sendall(b"x" * SAME); c.close()
elif r == 2:
    while not os.path.exists(f"{d}/same.done"): time.sleep(0.02)
    c = connect(); c.sendall(b"x" * CROSS); c.close()
)PY";

TEST(LaunchNetem, NodesShareANamespaceAndHostNameAndOnlyCrossNodeTrafficIsShaped) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  write_file(dir / "nodes.py", kNodesPy);
  const auto before = leftovers();
  Launcher l({"--nodes", "2x2", "--netem", "100mbit", "--iface-prefix", kPrefix, "--grace", "2", "--", kPython,
              dir / "nodes.py", dir.path},
             dir / "err");
  ASSERT_TRUE(l.wait(60));
  ASSERT_EQ(l.status, 0) << l.stderr_text();
  std::string netns[4];
  for (int r = 0; r < 4; ++r) {
    std::istringstream in(read_file(dir / ("info." + std::to_string(r))));
    std::string host, node, group, local, local_world, ifname, ifaces;
    in >> host >> node >> group >> local >> local_world >> netns[r] >> ifname >> ifaces;
    const std::string n = std::to_string(r / 2);
    EXPECT_EQ(host, "ddnode" + n) << "rank " << r;
    EXPECT_EQ(node, n) << "rank " << r;
    EXPECT_EQ(group, n) << "rank " << r;
    EXPECT_EQ(local, std::to_string(r % 2)) << "rank " << r;
    EXPECT_EQ(local_world, "2") << "rank " << r;
    EXPECT_EQ(ifname, std::string(kPrefix) + "eth0");
    EXPECT_EQ(ifaces, "ddteth0,lo") << "rank " << r;
  }
  EXPECT_EQ(netns[0], netns[1]);
  EXPECT_EQ(netns[2], netns[3]);
  EXPECT_NE(netns[0], netns[2]);
  std::istringstream in(read_file(dir / "rates"));
  std::string master, same_peer, cross_peer;
  long same_bytes = 0, cross_bytes = 0;
  double same_mbit = 0, cross_mbit = 0;
  in >> master >> same_peer >> same_bytes >> same_mbit >> cross_peer >> cross_bytes >> cross_mbit;
  EXPECT_EQ(same_bytes, 20000000);
  EXPECT_EQ(cross_bytes, 5000000);
  // Rank 1 shares node 0's address; rank 2 comes from node 1's.
  EXPECT_EQ(same_peer, master);
  ASSERT_EQ(master.rfind("10.77.", 0), 0u) << master;
  EXPECT_EQ(cross_peer, master.substr(0, master.rfind('.')) + ".2");
  EXPECT_GT(cross_mbit, 50.0) << "the link between nodes runs far below its shaped rate";
  EXPECT_LT(cross_mbit, 130.0) << "the 100mbit shaping between nodes is not applied";
  EXPECT_GT(same_mbit, 4 * 100.0) << "traffic inside a node must not go through the shaped link (cross-node: "
                                  << cross_mbit << " Mbit/s)";
  for (const auto& ns : netns) EXPECT_FALSE(exists("/run/netns/" + ns));
  EXPECT_EQ(leftovers(), before);
}

TEST(LaunchNetem, FailureTearsEverythingDown) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  write_file(dir / "fail.py",
             "import os, sys, time\n"
             "if os.environ['RANK'] == '1':\n    time.sleep(0.2); sys.exit(4)\n"
             "time.sleep(30)\n");
  const auto before = leftovers();
  Launcher l(netem_args("1gbit", 3, dir / "fail.py", dir.path), dir / "err");
  ASSERT_TRUE(l.wait(30));
  EXPECT_EQ(l.status, 4) << l.stderr_text();
  EXPECT_LT(l.elapsed, 10.0);
  EXPECT_NE(l.stderr_text().find("rank 1 "), std::string::npos) << l.stderr_text();
  EXPECT_EQ(leftovers(), before);
}

TEST(LaunchNetem, SigintTearsEverythingDown) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  write_file(dir / "wait.py",
             "import os, sys, time\n"
             "open(sys.argv[1] + '/ready.' + os.environ['RANK'], 'w').write(os.environ['DREAMDDP_NETNS'])\n"
             "time.sleep(30)\n");
  const auto before = leftovers();
  Launcher l(netem_args("1gbit", 2, dir / "wait.py", dir.path), dir / "err");
  ASSERT_TRUE(wait_for_files({dir / "ready.0", dir / "ready.1"}, 20)) << read_file(dir / "err");
  EXPECT_GT(leftovers().size(), before.size()) << "the cluster should exist while the ranks run";
  // Every link is shaped: the namespace end (uplink) and the bridge end (downlink) of both ranks.
  int host_ends = 0;
  for (const auto& p : leftovers()) {
    const std::string dev = p.substr(p.rfind('/') + 1);
    if (p.rfind("/sys/class/net/ddth", 0) != 0 || before.count(p)) continue;
    ++host_ends;
    const std::string q = netem::run_command({"tc", "qdisc", "show", "dev", dev}).output;
    EXPECT_NE(q.find("tbf 1: root"), std::string::npos) << dev << ": " << q;
    EXPECT_NE(q.find("rate 1Gbit"), std::string::npos) << dev << ": " << q;
  }
  EXPECT_EQ(host_ends, 2);
  for (int r = 0; r < 2; ++r) {
    const std::string ns = read_file(dir / ("ready." + std::to_string(r)));
    const std::string q = netem::run_command({"tc", "-n", ns, "qdisc", "show", "dev", "ddteth0"}).output;
    EXPECT_NE(q.find("tbf 1: root"), std::string::npos) << ns << ": " << q;
    EXPECT_NE(q.find("rate 1Gbit"), std::string::npos) << ns << ": " << q;
  }
  kill(l.pid, SIGINT);
  ASSERT_TRUE(l.wait(20));
  EXPECT_EQ(l.status, 128 + SIGINT) << l.stderr_text();
  EXPECT_EQ(leftovers(), before);
}

}  // namespace
}  // namespace dd::launch::test
