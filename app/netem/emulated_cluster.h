// The emulated cluster behind --netem: a private bridge, one network namespace per node (a host: one rank, or
// the B ranks of a node with --nodes AxB) joined to it by a veth pair, every link shaped with tc. Delay and loss
// come from the kernel's netem qdisc, or, where the kernel has none, from a userspace forwarder per node
// (LinkImpair) spliced between the node's veth and the bridge.
// Created by the constructor, removed by teardown()/the destructor.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/netem/netem_spec.h"
#include "app/netem/link_impair.h"

namespace dd::netem {

class EmulatedCluster {
 public:
  // How delay/loss are applied: none (rate-only spec), the kernel's netem qdisc, or the userspace forwarder.
  // DREAMDDP_NETEM_IMPL=kernel|userspace forces one (kernel without sch_netem: exit 2); unset/auto prefers
  // the kernel's and falls back to userspace when `tc ... netem` is refused as unknown.
  enum class Impair { none, kernel, userspace };

  // Needs root, `ip` and `tc`; throws dd::UsageError when they are missing or the kernel lacks a qdisc
  // the spec needs, std::runtime_error when a set-up step fails (everything made so far is removed).
  EmulatedCluster(int hosts, const NetemSpec& spec, const std::string& prefix);
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  // Per host (node) h. Ranks sharing a host bind to its one address: traffic between them stays on the
  // namespace's loopback path (local route), unshaped; traffic to other hosts crosses the shaped veth.
  const std::string& netns(int host) const { return netns_[host]; }
  std::string netns_path(int host) const { return "/run/netns/" + netns_[host]; }
  std::string address(int host) const;            // 10.77.<x>.<host+1>
  const std::string& iface() const { return ns_iface_; }  // the host's interface inside its namespace
  const std::string& bridge() const { return bridge_; }
  Impair impair() const { return impair_; }

  // Stops the userspace forwarders (printing each node's one-line frame/drop summary on stderr), then deletes
  // namespaces (which takes their veth pairs along), leftover host veths and the bridge.
  // Idempotent, never throws; returns false and prints what stayed behind when something could not go.
  bool teardown() noexcept;

 private:
  void claim_bridge();
  Impair choose_impair();
  void add_host(int host);
  void shape(const std::vector<std::string>& tc_prefix, const std::string& dev, bool with_netem);

  int hosts_;
  NetemSpec spec_;
  std::string prefix_;
  int id_ = 0;
  int subnet_ = 0;
  std::string bridge_;
  std::string ns_iface_;
  std::vector<std::string> netns_;      // names, one per host (filled as they are created)
  std::vector<std::string> host_veth_;  // host-side ends of the nodes' veths (bridge ports unless forwarded)
  std::vector<std::string> fwd_veth_;   // userspace mode: the forwarder's end of each node's pair to the bridge
  std::vector<std::unique_ptr<LinkImpair>> impairs_;  // userspace mode: one forwarder per node
  Impair impair_ = Impair::none;
  bool up_ = false;
};

}  // namespace dd::netem
