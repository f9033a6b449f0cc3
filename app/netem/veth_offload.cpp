// disable_offloads (see veth_offload.h): legacy SIOCETHTOOL get/set calls, made from a short-lived thread that
// enters the target network namespace (setns of a network namespace is per thread; the launcher stays put).
#include "app/netem/veth_offload.h"

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace dd::netem {
namespace {

// Runs in the worker thread; returns "" on success, else what went wrong.
std::string disable_here(const std::string& netns_path, const std::string& dev) {
  if (!netns_path.empty()) {
    const int ns = open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) return "open " + netns_path + ": " + strerror(errno);
    const int rc = setns(ns, CLONE_NEWNET);
    const int err = errno;
    close(ns);
    if (rc != 0) return "setns " + netns_path + ": " + strerror(err);
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + strerror(errno);
  auto call = [&](unsigned cmd, unsigned* value) {
    ethtool_value ev{};
    ev.cmd = cmd;
    ev.data = *value;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&ev);
    const int rc = ioctl(fd, SIOCETHTOOL, &ifr);
    *value = ev.data;
    return rc == 0;
  };
  std::string err;
  // Segmentation first (it depends on SG and checksumming); GRO off is best effort (veth merges only with
  // NAPI, which is off unless GRO or XDP was turned on).
  for (unsigned cmd : {ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SSG, ETHTOOL_STXCSUM}) {
    unsigned off = 0;
    if (!call(cmd, &off) && err.empty()) err = "SIOCETHTOOL set " + std::to_string(cmd) + ": " + strerror(errno);
  }
  unsigned off = 0;
  call(ETHTOOL_SGRO, &off);
  for (unsigned cmd : {ETHTOOL_GTSO, ETHTOOL_GGSO, ETHTOOL_GTXCSUM}) {
    unsigned v = 1;
    if (!call(cmd, &v)) {
      if (err.empty()) err = "SIOCETHTOOL get " + std::to_string(cmd) + ": " + strerror(errno);
    } else if (v != 0 && err.empty()) {
      err = "offload " + std::to_string(cmd) + " is still on";
    }
  }
  close(fd);
  return err;
}

}  // namespace

void disable_offloads(const std::string& netns_path, const std::string& dev) {
  std::string err;
  std::thread t([&] { err = disable_here(netns_path, dev); });
  t.join();
  if (!err.empty())
    throw std::runtime_error("cannot turn off the offloads (TSO/GSO/checksum) of " + dev +
                             (netns_path.empty() ? "" : " in " + netns_path) + ": " + err +
                             "; the userspace delay/loss forwarder needs whole frames");
}

}  // namespace dd::netem
