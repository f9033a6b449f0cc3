// The simulated cluster as the command line gives it: --cluster NxG[,intra=BW][,inter=BW][,lat=T], or a SimGrid
// platform file, plus per-rank compute slow-down factors (stragglers). Parsing only; no SimGrid here.
#pragma once
#include <map>
#include <string>

namespace dd::sim {

struct PlatformSpec {
  int nodes = 1;            // N nodes ...
  int per_node = 1;         // ... of G ranks each
  double intra_Bps = 100e9; // each rank's link to its node's switch, bytes/s (default 800 Gbit/s: NVLink-class)
  double inter_Bps = 125e6; // each node's uplink to the top switch, bytes/s (default 1 Gbit/s)
  double lat_s = 0;         // one-way latency between two nodes (half on each uplink); intra-node latency is 0
  std::string file;         // a SimGrid XML platform instead (ranks = its hosts in name order)
  std::map<int, double> slow;  // rank -> factor on its compute times (1.5 = 50% slower)
  // --shared-cores C[,threads=T]: every rank computes on one machine of C cores, T of them per rank while it
  // computes (ranks launched on one host, their links emulated); 0: each rank has a processor of its own.
  int shared_cores = 0;
  int rank_threads = 1;
  int world() const { return nodes * per_node; }
};

// "16x8,intra=300GBps,inter=1Gbps,lat=50us". Throws dd::UsageError naming the bad part.
PlatformSpec parse_cluster(const std::string& spec);

// "RANK=FACTOR" (--slow 3=1.5), added to `p`. Throws dd::UsageError.
void parse_slow(const std::string& arg, PlatformSpec& p);

// "C" or "C,threads=T" (--shared-cores), into `p`. Throws dd::UsageError naming the bad part.
void parse_shared_cores(const std::string& arg, PlatformSpec& p);

// "1Gbps" (bits/s: bps, kbps, Mbps, Gbps, Tbps, also tc's kbit/mbit/gbit), "300GBps" (bytes/s: Bps, kBps, MBps,
// GBps, TBps) -> bytes per second. Throws dd::UsageError mentioning `what`.
double parse_bandwidth(const std::string& v, const std::string& what);

// "50us", "1.5ms", "0.2s", "100ns" -> seconds (>= 0). Throws dd::UsageError mentioning `what`.
double parse_duration(const std::string& v, const std::string& what);

}  // namespace dd::sim
