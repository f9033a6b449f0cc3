// Unit tests of `dreamddp launch` argument and --netem spec parsing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "app/launch/launch.h"

namespace dd::launch {
namespace {

ParsedArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "launch");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_args(static_cast<int>(argv.size()), argv.data());
}

TEST(LaunchArgs, RateOnly) {
  const NetemSpec s = parse_netem("1gbit");
  EXPECT_DOUBLE_EQ(s.rate_bps, 1e9);
  EXPECT_EQ(s.delay_s, 0);
  EXPECT_EQ(s.loss_pct, 0);
  EXPECT_DOUBLE_EQ(parse_netem("100mbit").rate_bps, 1e8);
  EXPECT_DOUBLE_EQ(parse_netem("10Gbit").rate_bps, 1e10);
  EXPECT_DOUBLE_EQ(parse_netem("2.5gbit").rate_bps, 2.5e9);
  EXPECT_DOUBLE_EQ(parse_netem("512kbit").rate_bps, 512e3);
}

TEST(LaunchArgs, DelayAndLoss) {
  const NetemSpec s = parse_netem("100mbit,delay=2ms,loss=0.5%");
  EXPECT_DOUBLE_EQ(s.rate_bps, 1e8);
  EXPECT_DOUBLE_EQ(s.delay_s, 0.002);
  EXPECT_DOUBLE_EQ(s.loss_pct, 0.5);
  const NetemSpec t = parse_netem("10gbit,loss=1,delay=250us");
  EXPECT_DOUBLE_EQ(t.delay_s, 250e-6);
  EXPECT_DOUBLE_EQ(t.loss_pct, 1.0);
  EXPECT_DOUBLE_EQ(parse_netem("1gbit,delay=0.1s").delay_s, 0.1);
}

TEST(LaunchArgs, BadNetemSpecsAreUsageErrors) {
  for (const char* bad : {"", "fast", "1gbps", "1MBps", "gbit", "1gbit,delay=5", "1gbit,delay=-1ms",
                          "1gbit,foo=1", "1gbit,loss=200", "1gbit,loss=x", "delay=1ms", "1gbit,delay=1ms,delay=2ms",
                          "1gbit,", "1bit"}) {
    EXPECT_THROW(parse_netem(bad), UsageError) << "'" << bad << "'";
  }
}

TEST(LaunchArgs, OptionsAndCommand) {
  const ParsedArgs a = parse({"-n", "4", "--netem", "1gbit,delay=1ms", "--grace", "2.5", "--", "train", "-n", "9",
                              "--steps", "3"});
  EXPECT_EQ(a.options.nprocs, 4);
  ASSERT_TRUE(a.options.netem.has_value());
  EXPECT_DOUBLE_EQ(a.options.netem->delay_s, 0.001);
  EXPECT_DOUBLE_EQ(a.options.grace_s, 2.5);
  EXPECT_EQ(a.command, (std::vector<std::string>{"train", "-n", "9", "--steps", "3"}));
  EXPECT_FALSE(a.help);
}

TEST(LaunchArgs, AlternativeSpellings) {
  EXPECT_EQ(parse({"-n8", "--", "bench"}).options.nprocs, 8);
  EXPECT_EQ(parse({"--nprocs=3", "--", "bench"}).options.nprocs, 3);
  EXPECT_EQ(parse({"--nproc-per-node", "5", "--", "bench"}).options.nprocs, 5);
  const ParsedArgs a = parse({"-n", "2", "--rendezvous=redis://h:6379", "--iface-prefix", "lab", "--master-port",
                              "29501", "--", "/usr/bin/python3", "x.py"});
  EXPECT_EQ(a.options.rendezvous, "redis://h:6379");
  EXPECT_EQ(a.options.iface_prefix, "lab");
  EXPECT_EQ(a.options.master_port, 29501);
  EXPECT_FALSE(a.options.netem.has_value());
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(LaunchArgs, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"--", "train"},                               // missing -n
      {"-n", "0", "--", "train"},                    // n < 1
      {"-n", "-3", "--", "train"},
      {"-n", "two", "--", "train"},
      {"-n", "2", "--"},                             // nothing after --
      {"-n", "2"},                                   // no command at all
      {"-n", "2", "train"},                          // command without --
      {"-n", "2", "--netem", "fast", "--", "train"}, // bad spec
      {"-n", "2", "--netem"},                        // missing value
      {"-n", "2", "--bogus", "--", "train"},
      {"-n", "2", "--iface-prefix", "toolong", "--", "train"},
      {"-n", "2", "--iface-prefix", "a-b", "--", "train"},
      {"-n", "2", "--grace", "soon", "--", "train"},
      {"-n", "300", "--netem", "1gbit", "--", "train"},  // more ranks than one /24 holds
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(parse(args), UsageError) << joined;
  }
}

TEST(LaunchArgs, NodesSpellings) {
  const std::vector<std::vector<std::string>> forms = {
      {"--nodes", "2x3", "--", "train", "--nodes", "9"},
      {"--nodes", "2", "x", "3", "--", "train", "--nodes", "9"},
      {"--nodes", "2", "x3", "--", "train", "--nodes", "9"},
      {"--nodes", "2x", "3", "--", "train", "--nodes", "9"},
      {"--nodes=2X3", "--", "train", "--nodes", "9"},
      {"--nodes", "2 x 3", "--", "train", "--nodes", "9"},
      {"-n", "6", "--nodes", "2x3", "--", "train", "--nodes", "9"},
      {"--nodes", "2", "x", "3", "-n6", "--", "train", "--nodes", "9"},
  };
  for (const auto& f : forms) {
    std::string joined;
    for (const auto& a : f) joined += a + " ";
    const ParsedArgs a = parse(f);
    EXPECT_EQ(a.options.nodes, 2) << joined;
    EXPECT_EQ(a.options.ranks_per_node, 3) << joined;
    EXPECT_EQ(a.options.nprocs, 6) << joined;
    EXPECT_EQ(a.command, (std::vector<std::string>{"train", "--nodes", "9"})) << joined;
  }
  const ParsedArgs plain = parse({"-n", "4", "--", "train"});
  EXPECT_EQ(plain.options.nodes, 0);
  const ParsedArgs netem = parse({"--nodes", "4x1", "--netem", "1gbit", "--", "train"});
  EXPECT_EQ(netem.options.nprocs, 4);
  EXPECT_TRUE(netem.options.netem.has_value());
}

TEST(LaunchArgs, BadNodesSpecs) {
  int a = 0, b = 0;
  for (const char* bad : {"", "2", "x2", "2x", "0x2", "2x0", "2x2x2", "ax2", "2x-1", "2*2", "99999x1", "100x100",
                          "1.5x2"}) {
    EXPECT_THROW(parse_nodes(bad, &a, &b), UsageError) << "'" << bad << "'";
  }
  parse_nodes(" 64 X 64 ", &a, &b);  // blanks and a capital X are fine; 4096 ranks is the limit
  EXPECT_EQ(a, 64);
  EXPECT_EQ(b, 64);
  const std::vector<std::vector<std::string>> bad = {
      {"-n", "3", "--nodes", "2x2", "--", "train"},  // -n must be A*B
      {"--nodes", "2x2", "-n", "5", "--", "train"},
      {"--nodes", "2", "--", "train"},
      {"--nodes", "2", "x", "--", "train"},
      {"--nodes"},
      {"--nodes", "300x1", "--netem", "1gbit", "--", "train"},  // more nodes than one /24 holds
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(parse(args), UsageError) << joined;
  }
  // 300 ranks on 2 nodes fit: the /24 limit counts nodes.
  EXPECT_EQ(parse({"--nodes", "2x150", "--netem", "1gbit", "--", "train"}).options.nprocs, 300);
}

TEST(LaunchArgs, RunRejectsBadOptionsBeforeStartingAnything) {
  LaunchOptions o;
  o.nprocs = 0;
  EXPECT_THROW(run(o, {"/bin/true"}), UsageError);
  o.nprocs = 2;
  EXPECT_THROW(run(o, {}), UsageError);
  EXPECT_THROW(run(o, {"/nonexistent/dd-program"}), UsageError);
  o.nodes = 2;
  o.ranks_per_node = 2;  // 4 ranks, but nprocs says 2
  EXPECT_THROW(run(o, {"/bin/true"}), UsageError);
}

}  // namespace
}  // namespace dd::launch
