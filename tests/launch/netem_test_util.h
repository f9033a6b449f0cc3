// Shared by the --netem tests: the skip check (root + `ip netns`), the leftover check of the tests' own name
// prefix, the launch arguments, and the TCP round-trip probe script.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "app/netem/sys_command.h"
#include "tests/launch/launch_test_util.h"

namespace dd::launch::test {

inline const char* kPython = "/usr/bin/python3";
inline const char* kPrefix = "ddt";  // tests use their own name prefix so leftovers are unambiguous

// Why the emulated cluster cannot be tested here, or "" when it can.
inline std::string netem_unavailable() {
  if (geteuid() != 0) return "not root";
  if (!exists(kPython)) return "no /usr/bin/python3";
  const std::string probe = "ddtprobe" + std::to_string(getpid());
  if (netem::run_command({"ip", "netns", "add", probe}).status != 0) return "`ip netns add` is not permitted here";
  netem::run_command({"ip", "netns", "del", probe});
  return "";
}

#define SKIP_WITHOUT_NETNS()                                   \
  do {                                                         \
    const std::string why = netem_unavailable();               \
    if (!why.empty()) GTEST_SKIP() << "netem tests: " << why;  \
  } while (0)

// Names of network namespaces and root-namespace links the tests' prefix created and did not remove.
inline std::set<std::string> leftovers() {
  std::set<std::string> out;
  for (const char* dir : {"/run/netns", "/sys/class/net"}) {
    if (DIR* d = opendir(dir)) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (n.rfind(kPrefix, 0) == 0 && n.rfind("ddtprobe", 0) != 0) out.insert(std::string(dir) + "/" + n);
      }
      closedir(d);
    }
  }
  return out;
}

inline std::vector<std::string> netem_args(const std::string& spec, int n, const std::string& script,
                                           const std::string& dir) {
  return {"-n", std::to_string(n), "--netem", spec, "--iface-prefix", kPrefix, "--grace", "2", "--",
          kPython, script, dir};
}

// The shared two-rank link probe (app/netem/netprobe.py: echo, rtt, bulk) under --netem SPEC; it writes
// its results into DIR.
inline std::vector<std::string> netprobe_args(const std::string& spec, const std::string& dir,
                                              const std::vector<std::string>& probe) {
  std::vector<std::string> a = {"-n", "2", "--netem", spec, "--iface-prefix", kPrefix, "--grace", "2", "--",
                                kPython, DD_NETPROBE, probe.at(0), dir};
  a.insert(a.end(), probe.begin() + 1, probe.end());
  return a;
}


}  // namespace dd::launch::test
