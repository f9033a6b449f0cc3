// Fault injection on a netem link (root + `ip netns` only, skipped otherwise): `launch --netem` delay is real
// (a TCP round trip grows by 2 x delay), loss is real (the forwarder drops about the requested share of a
// node's frames and the transfer still arrives intact), and faults cost time, never math (a 4-rank training
// run under delay and loss ends with parameters bitwise equal to the same run on a clean network).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "tests/launch/launch_test_util.h"
#include "tests/launch/netem_test_util.h"

namespace dd::launch::test {
namespace {

// One node's line of the forwarder's end-of-job summary, parsed; found = false when it is missing.
struct UplinkSummary {
  bool found = false;
  unsigned long long frames = 0, dropped = 0;
  double pct = 0, delay_ms = 0;
};

UplinkSummary uplink_summary(const std::string& err, int node) {
  UplinkSummary s;
  const std::string key = "netem: node" + std::to_string(node) + " uplink: ";
  const size_t at = err.find(key);
  if (at == std::string::npos) return s;
  s.found = std::sscanf(err.c_str() + at + key.size(), "%llu frames, %llu dropped (%lf%%), delay %lf ms", &s.frames,
                        &s.dropped, &s.pct, &s.delay_ms) == 4;
  return s;
}

// Sets DREAMDDP_NETEM_IMPL for the launchers this test forks, and restores it.
struct ImplEnv {
  explicit ImplEnv(const char* value) {
    if (const char* v = std::getenv("DREAMDDP_NETEM_IMPL")) old = v, had = true;
    setenv("DREAMDDP_NETEM_IMPL", value, 1);
  }
  ~ImplEnv() { had ? (void)setenv("DREAMDDP_NETEM_IMPL", old.c_str(), 1) : (void)unsetenv("DREAMDDP_NETEM_IMPL"); }
  std::string old;
  bool had = false;
};

double median_rtt_ms(const std::string& spec, TmpDir& dir, std::string* err) {
  std::remove((dir / "rtt").c_str());
  Launcher l(netprobe_args(spec, dir.path, {"rtt", "15"}), dir / "err");
  if (!l.wait(40)) return -1;
  *err = l.stderr_text();
  if (l.status != 0) return -2;
  return std::stod(read_file(dir / "rtt"));
}

// The same 1-byte ping-pong with and without delay=5ms: the one-way delay is added once per direction.
TEST(LaunchNetemFault, DelayAddsTwiceTheDelayToTheRoundTrip) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  const auto before = leftovers();
  std::string err_clean, err_delay;
  const double clean = median_rtt_ms("1gbit", dir, &err_clean);
  ASSERT_GE(clean, 0) << err_clean;
  const double delayed = median_rtt_ms("1gbit,delay=5ms", dir, &err_delay);
  ASSERT_GE(delayed, 0) << err_delay;
  EXPECT_GT(delayed - clean, 8.0) << "clean " << clean << " ms, delay=5ms " << delayed << " ms";
  EXPECT_LT(delayed - clean, 20.0) << "clean " << clean << " ms, delay=5ms " << delayed << " ms";
  // Userspace forwarder (this kernel has no sch_netem): it reports every node, delayed and loss-free.
  if (err_delay.find("userspace forwarder") != std::string::npos) {
    for (int node = 0; node < 2; ++node) {
      const UplinkSummary s = uplink_summary(err_delay, node);
      ASSERT_TRUE(s.found) << err_delay;
      EXPECT_GT(s.frames, 15u) << "15 pings and the handshake cross every uplink: " << err_delay;
      EXPECT_EQ(s.dropped, 0u) << err_delay;
      EXPECT_DOUBLE_EQ(s.delay_ms, 5.0) << err_delay;
    }
  }
  EXPECT_EQ(err_clean.find("netem: node"), std::string::npos) << "a rate-only link needs no forwarder";
  EXPECT_EQ(leftovers(), before);
}

TEST(LaunchNetemFault, LossDropsTheRequestedShareAndTheTransferStillArrivesIntact) {
  SKIP_WITHOUT_NETNS();
  ImplEnv impl("userspace");  // the forwarder's counters are what this test reads
  TmpDir dir;
  const auto before = leftovers();
  // Rank 1 sends 8 MB of a fixed pattern; rank 0 checks its SHA-256.
  Launcher l(netprobe_args("1gbit,loss=2%", dir.path, {"bulk", "8000000"}), dir / "err");
  ASSERT_TRUE(l.wait(45));
  const std::string err = l.stderr_text();
  ASSERT_EQ(l.status, 0) << err;
  EXPECT_EQ(read_file(dir / "bulk").substr(0, 11), "8000000 ok ");
  // The sender's uplink carries ~5500 full frames (8 MB / 1448-byte segments) plus retransmissions: with
  // p = 2% the drop share is binomial, sd ~0.19 points, so [1.2, 2.8] % is over 4 sd wide on each side.
  const UplinkSummary s = uplink_summary(err, 1);
  ASSERT_TRUE(s.found) << err;
  EXPECT_GT(s.frames, 5400u) << err;
  EXPECT_LT(s.frames, 9000u) << "frames must be MTU-sized and counted once: " << err;
  const double pct = 100.0 * double(s.dropped) / double(s.frames);
  EXPECT_GT(pct, 1.2) << err;
  EXPECT_LT(pct, 2.8) << err;
  EXPECT_NEAR(s.pct, pct, 0.01) << err;
  // The receiver's uplink (ACKs) is impaired too, independently.
  const UplinkSummary acks = uplink_summary(err, 0);
  ASSERT_TRUE(acks.found) << err;
  EXPECT_GT(acks.frames, 100u) << err;
  EXPECT_EQ(err.find("oversize"), std::string::npos) << "offloads must be off on forwarded links: " << err;
  EXPECT_EQ(leftovers(), before);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Faults may cost time, never math: 4 ranks of dreamddp:h=4 training, once on a clean 1gbit network and once
// with 2 ms one-way delay and 1% loss; every rank's final parameters must be bitwise equal. dreamddp reads its
// profile from a file: a self-profile measures the network, so its schedule (and fill-in) would differ by design.
TEST(LaunchNetemFault, TrainingUnderDelayAndLossIsBitwiseEqualToACleanNetwork) {
  SKIP_WITHOUT_NETNS();
  TmpDir dir;
  const auto before = leftovers();
  const std::string prof = dir / "profile";
  std::filesystem::create_directories(prof);
  std::ofstream(prof + "/bp.json") << R"({"fc1": 0.004, "fc2": 0.002, "fc3": 0.002, "fc4": 0.001})";
  std::ofstream(prof + "/comm.json") << R"({"fc1": 0.030, "fc2": 0.010, "fc3": 0.010, "fc4": 0.001})";
  auto train = [&](const std::string& spec, const std::string& tag, std::string* err) {
    Launcher l({"-n", "4", "--netem", spec, "--iface-prefix", kPrefix, "--grace", "2", "--", DREAMDDP_BIN,
                "train", "--model", "mlp", "--data", "synthetic", "--steps", "20", "--batch", "16", "--policy",
                "dreamddp:h=4,profile=" + prof, "--save-params", dir / (tag + ".%r.bin"), "--out", dir / ("out-" + tag)},
               dir / ("err-" + tag));
    const bool done = l.wait(50);
    *err = l.stderr_text();
    return done ? l.status : -1;
  };
  std::string err_clean, err_faulty;
  ASSERT_EQ(train("1gbit", "clean", &err_clean), 0) << err_clean;
  ASSERT_EQ(train("1gbit,delay=2ms,loss=1%", "faulty", &err_faulty), 0) << err_faulty;
  for (int r = 0; r < 4; ++r) {
    const std::string clean = slurp(dir / ("clean." + std::to_string(r) + ".bin"));
    const std::string faulty = slurp(dir / ("faulty." + std::to_string(r) + ".bin"));
    ASSERT_GT(clean.size(), 1000000u) << "rank " << r << ": no parameters saved";
    EXPECT_EQ(clean.size(), faulty.size()) << "rank " << r;
    EXPECT_TRUE(clean == faulty) << "rank " << r << ": parameters differ after a run under delay and loss";
  }
  // The faults really happened (userspace forwarder: its counts say so).
  if (err_faulty.find("userspace forwarder") != std::string::npos) {
    unsigned long long dropped = 0;
    for (int node = 0; node < 4; ++node) {
      const UplinkSummary s = uplink_summary(err_faulty, node);
      ASSERT_TRUE(s.found) << err_faulty;
      EXPECT_DOUBLE_EQ(s.delay_ms, 2.0);
      dropped += s.dropped;
    }
    EXPECT_GT(dropped, 100u) << err_faulty;
  }
  EXPECT_EQ(leftovers(), before);
}

}  // namespace
}  // namespace dd::launch::test
