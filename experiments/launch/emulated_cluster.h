// The emulated cluster behind --netem: a private bridge, one network namespace per rank joined to it by a
// veth pair, every link shaped with tc. Created by the constructor, removed by teardown()/the destructor.
#pragma once
#include <string>
#include <vector>

#include "experiments/launch/launch.h"

namespace dd::launch {

class EmulatedCluster {
 public:
  // Needs root, `ip` and `tc`; throws dd::UsageError when they are missing or the kernel lacks a qdisc
  // the spec needs, std::runtime_error when a set-up step fails (everything made so far is removed).
  EmulatedCluster(int world, const NetemSpec& spec, const std::string& prefix);
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  const std::string& netns(int rank) const { return netns_[rank]; }
  std::string netns_path(int rank) const { return "/run/netns/" + netns_[rank]; }
  std::string address(int rank) const;            // 10.77.<x>.<rank+1>
  const std::string& iface() const { return ns_iface_; }  // the rank's interface inside its namespace
  const std::string& bridge() const { return bridge_; }

  // Deletes namespaces (which takes their veth pairs along), leftover host veths and the bridge.
  // Idempotent, never throws; returns false and prints what stayed behind when something could not go.
  bool teardown() noexcept;

 private:
  void claim_bridge();
  void add_rank(int rank);
  void shape(const std::vector<std::string>& tc_prefix, const std::string& dev, bool with_netem);

  int world_;
  NetemSpec spec_;
  std::string prefix_;
  int id_ = 0;
  int subnet_ = 0;
  std::string bridge_;
  std::string ns_iface_;
  std::vector<std::string> netns_;      // names, one per rank (filled as they are created)
  std::vector<std::string> host_veth_;  // bridge-side ends
  bool up_ = false;
};

}  // namespace dd::launch
