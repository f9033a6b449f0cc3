// Connecting a rank: the backend from the options and environment, then the start-up handshake that refuses
// ranks whose configurations differ.
#include "app/cli/connect.h"

#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace dd::cli {
namespace {

}  // namespace

std::string config_fingerprint(const train::TrainConfig& c) {
  std::ostringstream s;
  s << "model=" << c.model << "\npolicy=" << c.policy << "\nseed=" << c.seed << "\nbatch=" << c.batch
    << "\nworld=" << c.world << "\nbackend=" << name(c.backend) << "\nsteps=" << c.steps << "\ndata=" << c.data
    << "\noptimizer=" << name(c.optimizer) << "\nlr=" << c.lr << "\nprecision=" << precision_name(c.precision) << "\n";
  for (auto& sw : c.switches) s << "switch=" << sw << "\n";
  return s.str();
}

namespace {

// Refuses ranks whose configuration differs from rank 0's, naming the fields.
void handshake(Backend& b, const train::TrainConfig& c) {
  auto all = b.allgather(config_fingerprint(c));
  auto fields = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    return v;
  };
  auto mine = fields(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    auto theirs = fields(all[r]);
    std::string diff;
    for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
      std::string a = i < mine.size() ? mine[i] : "", t = i < theirs.size() ? theirs[i] : "";
      if (a != t) diff += (diff.empty() ? "" : ", ") + t.substr(0, t.find('=')) + " (rank 0: " + a + ", rank " +
                          std::to_string(r) + ": " + t + ")";
    }
    throw UsageError("ranks disagree on the configuration: " + diff);
  }
}

}  // namespace

BackendOptions backend_options(const train::TrainConfig& cfg) {
  BackendOptions bo;
  bo.kind = cfg.backend;
  bo.rank = cfg.rank;
  bo.world = cfg.world;
  bo.rendezvous = resolve_rendezvous(cfg.rendezvous, cfg.backend == train::BackendKind::Gloo ? cfg.out : "");
  if (bo.rendezvous.empty() && cfg.backend == train::BackendKind::Gloo)
    throw UsageError("several ranks need --rendezvous (or --out for a file store under the run directory)");
  bo.iface = cfg.iface;
  bo.timeout_s = cfg.timeout_s;
  // Under shrink a failed collective ends at once, without the post-mortem that names the lost rank: the survivors
  // agree on who is left themselves, and their closed sockets make the peers blocked on them fail at once too.
  if (cfg.shrink_on_peer_loss) bo.postmortem_s = 0;
  return bo;
}

std::unique_ptr<Backend> connect(const train::TrainConfig& cfg) {
  std::unique_ptr<Backend> backend;
  if (cfg.world > 1) {
    backend = make_backend(backend_options(cfg));
    handshake(*backend, cfg);
  }
  return backend;
}

}  // namespace dd::cli
