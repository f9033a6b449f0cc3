// Shared by the --netem tests: the skip check (root + `ip netns`), the leftover check of the tests' own name
// prefix, the launch arguments, and the TCP round-trip probe script.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "experiments/launch/sys_command.h"
#include "tests/launch/launch_test_util.h"

namespace dd::launch::test {

inline const char* kPython = "/usr/bin/python3";
inline const char* kPrefix = "ddt";  // tests use their own name prefix so leftovers are unambiguous

// Why the emulated cluster cannot be tested here, or "" when it can.
inline std::string netem_unavailable() {
  if (geteuid() != 0) return "not root";
  if (!exists(kPython)) return "no /usr/bin/python3";
  const std::string probe = "ddtprobe" + std::to_string(getpid());
  if (run_command({"ip", "netns", "add", probe}).status != 0) return "`ip netns add` is not permitted here";
  run_command({"ip", "netns", "del", probe});
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

// Median TCP round trip of 1-byte ping-pongs between rank 1 and rank 0, in milliseconds.
inline const char* kRttPy = R"PY(
import os, socket, sys, time
d, r = sys.argv[1], int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if r == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port)); s.listen(1)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(1)
        if not b: break
        c.sendall(b)
else:
    end = time.time() + 10
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5); break
        except OSError:
            if time.time() > end: raise
            time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(15):
        t0 = time.time(); c.sendall(b"p"); c.recv(1); rtts.append((time.time() - t0) * 1e3)
    c.close()
    open(f"{d}/rtt", "w").write(f"{sorted(rtts)[len(rtts) // 2]:.3f}\n")
)PY";

}  // namespace dd::launch::test
