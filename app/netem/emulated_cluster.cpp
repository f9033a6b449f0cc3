// Builds and removes the --netem emulated cluster with `ip` and `tc` (see emulated_cluster.h).
// Only names this launcher claimed are touched: the bridge name is claimed atomically by creating it, and
// namespaces/veths carry the same id. No addresses on the bridge, no routes, no NAT: ranks reach only each other.
#include "app/netem/emulated_cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "base/error.h"
#include "app/netem/sys_command.h"
#include "app/netem/veth_offload.h"

namespace dd::netem {
namespace {

bool path_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

bool link_exists(const std::string& dev) { return path_exists("/sys/class/net/" + dev); }

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

EmulatedCluster::EmulatedCluster(int hosts, const NetemSpec& spec, const std::string& prefix)
    : hosts_(hosts), spec_(spec), prefix_(prefix), ns_iface_(prefix + "eth0") {
  if (geteuid() != 0)
    throw UsageError("--netem needs root (it creates network namespaces, veth pairs and tc qdiscs); "
                     "run as root or drop --netem to use plain loopback");
  if (find_executable("ip").empty() || find_executable("tc").empty())
    throw UsageError("--netem needs the `ip` and `tc` tools (Debian package iproute2)");
  try {
    claim_bridge();
    impair_ = choose_impair();
    for (int h = 0; h < hosts_; ++h) add_host(h);
  } catch (...) {
    teardown();
    throw;
  }
}

EmulatedCluster::~EmulatedCluster() { teardown(); }

std::string EmulatedCluster::address(int host) const {
  return "10.77." + std::to_string(subnet_) + "." + std::to_string(host + 1);
}

void EmulatedCluster::claim_bridge() {
  // Creating the bridge is the atomic claim of an id: a concurrent launcher with the same id gets EEXIST and
  // moves on, so whoever holds the bridge also owns the namespaces and veths with that id.
  id_ = static_cast<int>(getpid() % 10000);
  for (int attempt = 0; attempt < 100; ++attempt, id_ = (id_ + 1) % 10000) {
    const std::string name = prefix_ + "br" + std::to_string(id_);
    const CommandResult r = run_command({"ip", "link", "add", "name", name, "type", "bridge"});
    if (r.status == 0) {
      bridge_ = name;
      up_ = true;
      subnet_ = id_ % 256;
      // No IPv6 link-local on the bridge: the host itself sends nothing into the emulated network.
      must_run({"ip", "link", "set", "dev", bridge_, "addrgenmode", "none"});
      must_run({"ip", "link", "set", "dev", bridge_, "up"});
      return;
    }
    if (r.output.find("File exists") == std::string::npos)
      throw std::runtime_error("cannot create bridge " + name + ": " + r.output);
  }
  throw std::runtime_error("no free bridge name " + prefix_ + "br<id> found (100 ids taken); "
                           "remove stale ones with experiments/netem_cluster.sh clean");
}

EmulatedCluster::Impair EmulatedCluster::choose_impair() {
  if (spec_.delay_s <= 0 && spec_.loss_pct <= 0) return Impair::none;
  const char* env = std::getenv("DREAMDDP_NETEM_IMPL");
  const std::string want = env && *env ? env : "auto";
  if (want != "auto" && want != "kernel" && want != "userspace")
    throw UsageError("DREAMDDP_NETEM_IMPL='" + want + "': expected auto, kernel or userspace");
  if (want == "userspace") return Impair::userspace;
  // Probe sch_netem on our own (still empty) bridge: the answer decides the topology before any node exists.
  const std::vector<std::string> probe = {"tc", "qdisc", "add", "dev", bridge_, "root", "netem", "delay", "1ms"};
  const CommandResult r = run_command(probe);
  if (r.status == 0) {
    run_command({"tc", "qdisc", "del", "dev", bridge_, "root"});
    return Impair::kernel;
  }
  const bool missing = r.output.find("unknown") != std::string::npos ||
                       r.output.find("not supported") != std::string::npos;
  if (!missing) throw std::runtime_error("`" + join_command(probe) + "` failed: " + r.output);
  if (want == "kernel")
    throw UsageError("--netem " + spec_.text + ": DREAMDDP_NETEM_IMPL=kernel, but this kernel has no netem "
                     "qdisc (sch_netem): `" + join_command(probe) + "`: " + r.output +
                     "; unset DREAMDDP_NETEM_IMPL to emulate delay/loss in userspace");
  std::fprintf(stderr, "dreamddp launch: netem: this kernel has no sch_netem; delay/loss of --netem %s are "
               "applied by a userspace forwarder per node\n", spec_.text.c_str());
  return Impair::userspace;
}

void EmulatedCluster::add_host(int host) {
  const std::string id = std::to_string(id_);
  const std::string ns = prefix_ + "ns" + id + "-" + std::to_string(host);
  const std::string hv = prefix_ + "h" + id + "r" + std::to_string(host);
  // Userspace mode: node ns ⇄ (ddeth0 | hv) ⇄ forwarder ⇄ (hu | hb) ⇄ bridge.
  const std::string hu = prefix_ + "u" + id + "r" + std::to_string(host);
  const std::string hb = prefix_ + "b" + id + "r" + std::to_string(host);
  const bool forwarded = impair_ == Impair::userspace;
  // Leftovers with our id belong to a launcher that died (we hold the bridge claim): clear them.
  for (const auto& dev : {hv, hu})
    if (link_exists(dev)) run_command({"ip", "link", "del", "dev", dev});
  if (path_exists("/run/netns/" + ns)) run_command({"ip", "netns", "del", ns});

  must_run({"ip", "netns", "add", ns});
  netns_.push_back(ns);
  must_run({"ip", "link", "add", "name", hv, "type", "veth", "peer", "name", ns_iface_, "netns", ns});
  host_veth_.push_back(hv);
  if (forwarded) {
    must_run({"ip", "link", "add", "name", hu, "type", "veth", "peer", "name", hb});
    fwd_veth_.push_back(hu);
    // The forwarder's links carry only the nodes' frames: no IPv6 link-local chatter from the host.
    for (const auto& dev : {hv, hu, hb}) must_run({"ip", "link", "set", "dev", dev, "addrgenmode", "none"});
    must_run({"ip", "link", "set", "dev", hb, "master", bridge_});
    for (const auto& dev : {hb, hu}) must_run({"ip", "link", "set", "dev", dev, "up"});
    // The forwarder reads and re-sends single frames: the node must hand its veth whole, checksummed frames
    // (no TSO/GSO super-frames), and no link on the way may merge them (GRO).
    disable_offloads(netns_path(host), ns_iface_);
    for (const auto& dev : {hv, hu, hb}) disable_offloads("", dev);
  } else {
    must_run({"ip", "link", "set", "dev", hv, "master", bridge_});
  }
  must_run({"ip", "link", "set", "dev", hv, "up"});
  must_run({"ip", "-n", ns, "link", "set", "dev", "lo", "up"});
  // IPv4 only: without an IPv6 link-local address Gloo cannot pick an unroutable fe80:: for the interface.
  must_run({"ip", "-n", ns, "link", "set", "dev", ns_iface_, "addrgenmode", "none"});
  must_run({"ip", "-n", ns, "addr", "add", address(host) + "/24", "dev", ns_iface_});
  must_run({"ip", "-n", ns, "link", "set", "dev", ns_iface_, "up"});
  // Egress of the namespace end = the host's uplink; egress of the bridge end = its downlink. Delay and loss
  // go on the uplink only, so a packet between two hosts sees them exactly once (one-way latency = delay).
  shape({"tc", "-n", ns}, ns_iface_, impair_ == Impair::kernel);
  shape({"tc"}, hv, false);
  if (forwarded) {
    ImpairConfig cfg;
    cfg.delay_s = spec_.delay_s;
    cfg.loss_pct = spec_.loss_pct;
    cfg.seed = 0x6e6574656d000000ull + static_cast<uint64_t>(host);  // fixed: reruns draw the same pattern
    // Like netem's limit: twice the bandwidth-delay product in full frames, plus what the sockets can buffer
    // while the forwarder waits for a core.
    const double bdp = spec_.rate_bps / 8 * spec_.delay_s / 1500;
    cfg.queue_frames = static_cast<size_t>(std::min(65536.0, 2 * bdp + 4096));
    impairs_.push_back(std::make_unique<LinkImpair>(host, hv, hu, cfg));
  }
}

void EmulatedCluster::shape(const std::vector<std::string>& tc_prefix, const std::string& dev, bool with_netem) {
  const double bytes_per_s = spec_.rate_bps / 8;
  // The bucket must hold a GSO packet (64 KiB) or tbf drops it; 2 ms worth keeps fast links at full rate.
  const double burst = std::max(98304.0, bytes_per_s * 0.002);
  std::vector<std::string> tbf = tc_prefix;
  for (const char* a : {"qdisc", "add", "dev"}) tbf.emplace_back(a);
  tbf.push_back(dev);
  for (const std::string& a : {std::string("root"), std::string("handle"), std::string("1:"), std::string("tbf"),
                               std::string("rate"), num(spec_.rate_bps) + "bit", std::string("burst"), num(burst),
                               std::string("latency"), std::string("50ms")})
    tbf.push_back(a);
  must_run(tbf);
  if (!with_netem || (spec_.delay_s <= 0 && spec_.loss_pct <= 0)) return;

  std::vector<std::string> nq = tc_prefix;
  for (const char* a : {"qdisc", "add", "dev"}) nq.emplace_back(a);
  nq.push_back(dev);
  for (const char* a : {"parent", "1:1", "handle", "10:", "netem"}) nq.emplace_back(a);
  // netem holds every delayed packet: size its queue for the bandwidth-delay product (1500-byte packets).
  const double limit = std::max(1000.0, 2 * bytes_per_s * spec_.delay_s / 1500 + 1000);
  nq.emplace_back("limit");
  nq.push_back(num(limit));
  if (spec_.delay_s > 0) {
    nq.emplace_back("delay");
    nq.push_back(num(spec_.delay_s * 1e6) + "us");
  }
  if (spec_.loss_pct > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", spec_.loss_pct);
    nq.emplace_back("loss");
    nq.emplace_back(buf);
  }
  const CommandResult r = run_command(nq);
  if (r.status == 0) return;
  if (r.output.find("unknown") != std::string::npos || r.output.find("not supported") != std::string::npos)
    throw UsageError("--netem " + spec_.text + ": delay/loss need the kernel's netem qdisc (sch_netem), "
                     "which this kernel does not offer (`" + join_command(nq) + "`: " + r.output +
                     "); use a rate-only spec like --netem 1gbit or load sch_netem");
  throw std::runtime_error("`" + join_command(nq) + "` failed: " + r.output);
}

bool EmulatedCluster::teardown() noexcept {
  if (!up_) return true;
  up_ = false;
  bool ok = true;
  // Forwarders first: their sockets hold the links, and their counts are the job's fault record.
  for (auto& f : impairs_) {
    f->stop();
    try {
      std::fprintf(stderr, "dreamddp launch: %s\n", f->summary().c_str());
    } catch (...) {
      ok = false;
    }
  }
  impairs_.clear();
  try {
    // Deleting the host end removes both ends of the pair at once (namespace deletion would do it later,
    // asynchronously); then the namespaces, then the bridge.
    for (const auto& hv : host_veth_)
      if (link_exists(hv)) run_command({"ip", "link", "del", "dev", hv});
    for (const auto& hu : fwd_veth_)
      if (link_exists(hu)) run_command({"ip", "link", "del", "dev", hu});
    for (const auto& ns : netns_)
      if (path_exists("/run/netns/" + ns)) run_command({"ip", "netns", "del", ns});
    if (!bridge_.empty() && link_exists(bridge_)) run_command({"ip", "link", "del", "dev", bridge_});
    std::string left;
    for (const auto& hv : host_veth_)
      if (link_exists(hv)) left += " " + hv;
    for (const auto& hu : fwd_veth_)
      if (link_exists(hu)) left += " " + hu;
    for (const auto& ns : netns_)
      if (path_exists("/run/netns/" + ns)) left += " netns:" + ns;
    if (!bridge_.empty() && link_exists(bridge_)) left += " " + bridge_;
    if (!left.empty()) {
      std::fprintf(stderr, "dreamddp launch: could not remove:%s (try experiments/netem_cluster.sh clean)\n",
                   left.c_str());
      ok = false;
    }
  } catch (...) {
    ok = false;
  }
  host_veth_.clear();
  fwd_veth_.clear();
  netns_.clear();
  return ok;
}

}  // namespace dd::netem
