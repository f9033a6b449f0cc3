// Shrink without restart (docs/elastic.md "Shrink without restart", `train --on-peer-loss shrink`): when a peer is
// lost, the survivors agree on who is left through the rendezvous store, and only a quorum of more than half of
// the previous world continues, on new backends (dense new ranks), from its current parameters averaged once.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/key_store.h"
#include "base/error.h"

namespace dd {
class Backend;
}

namespace dd::train {

// This rank may not continue: it is not in the quorum that formed the new world, or no quorum formed in time.
// A PeerLost: exit 3.
struct QuorumLost : PeerLost {
  using PeerLost::PeerLost;
};

// The agreement formed a new world without this rank (it was silent or cut off while the others agreed): the
// process may ask the live world to admit it again (`train --rejoins-in-place`), as a restarted one would.
struct Excluded : QuorumLost {
  using QuorumLost::QuorumLost;
};

// The rendezvous key store the agreement runs on (file:// or redis://).
using dd::KeyStore;
using dd::make_file_key_store;

// One world of the run: its generation (0: the world the run started with) and its members, named by the rank
// each process was started as, in new-rank order.
struct Membership {
  int generation = 0;
  std::vector<int> members;
  int64_t step = 0;  // the step every member continues at
};

struct AgreeTiming {
  double join_s = 8;     // how long after its own detection a rank waits for every member to report
  double decide_s = 8;   // after that, how long a rank without a quorum in sight waits for a decision
  double poll_s = 0.02;
};

// Reachability on the ranks' own network (backends/common/reach_probe.h), for the agreement: this rank's probe
// address and a test of another's. A partition can leave the store reachable, so that a cut-off member keeps
// reporting; with a ReachCheck each member probes the others that report, and a member that fewer than half of the
// others reach is fenced out of the new world (it then finds itself excluded, QuorumLost).
struct ReachCheck {
  std::string address;
  std::function<bool(const std::string& address)> reaches;
};

// The survivors' agreement after a loss in world `old`. Every live member calls it with its start rank `me` and
// the step it failed in. Each reports under the key prefix `<prefix>/g<old.generation + 1>` (a fresh prefix per
// generation, so keys of different worlds never mix); once every member has reported, or the join window has
// passed with more than half of them reported (or more than half reported and every other member was reported
// lost by its supervisor, report_lost), the first such proposal is claimed as the decision, which every
// member reads. The new world: the reported members in start-rank order, continuing at the latest step any of
// them failed in. With `reach`, every reporter also publishes which of the others it reached, a proposal waits for
// those reports (within the join window) and leaves out the members that fewer than half of the others reached.
// Throws QuorumLost when this rank is not in the decision, or when no quorum formed within join_s + decide_s; the
// message names the quorum it missed.
Membership agree_survivors(KeyStore& store, const std::string& prefix, const Membership& old, int me,
                           int64_t failed_step, const AgreeTiming& timing, const ReachCheck* reach = nullptr);

// "0, 2, 3"
std::string join_ranks(const std::vector<int>& ranks);

// When the live world looks for joiners: at the last step of every period of `every` steps (step + 1 a multiple of
// `every`; 0: never), once, so that a world with joiners grows at the next step, the first of a period. Every
// member must answer alike, since the look is a collective. A rank that failed in the collective of a check step
// may or may not have passed it, so after a shrink every survivor restarts the count at the step it redoes
// (restart_at): that step is not looked at again, the next multiple is.
class JoinCheck {
 public:
  JoinCheck() = default;
  JoinCheck(int64_t every, int64_t start) : every_(every), last_(start) {}
  // True (and remembered) when `step` is a check step not looked at yet.
  bool due(int64_t step) {
    if (every_ <= 0 || step <= last_ || (step + 1) % every_ != 0) return false;
    last_ = step;
    return true;
  }
  void restart_at(int64_t step) { last_ = step; }

 private:
  int64_t every_ = 0;
  int64_t last_ = -1;
};

// Rejoin with live recovery (docs/elastic.md "Rejoin"). A rank started again under the same rendezvous (by
// `launch --max-restarts` under shrink, or by hand with `train --rejoin`) posts a request under
// `<prefix>/join/<id>` (id: the rank it was started as; nonce: this process, so an old answer is never taken).
// At each check step the live world's rank 0 looks for requests of ranks that are not members, and answers each
// with the world it joins: the members in order, then the joiners, continuing at that step.
// A request also carries the joiner's fingerprint (its configuration, "key=value" lines, and its profile): rank 0
// refuses a joiner whose fingerprint differs from the live world's (refuse_join) before the world grows.
struct JoinRequest {
  int id = 0;
  std::string nonce;
  std::string address;      // the joiner's reach probe (ReachCheck::address), "" when it has none
  std::string fingerprint;  // "" when the joiner posted none
};
// This process, now ("pid-microseconds"): a joiner's request and a member's heartbeats carry it, so that an answer
// or a beat of an earlier process of the same start rank is never taken for this one's.
std::string process_nonce();
void post_join(KeyStore& store, const std::string& prefix, int me, const std::string& nonce,
               const std::string& address = "", const std::string& fingerprint = "");
// The requests of start ranks 0..ids-1 that are not members of `world`, in start-rank order.
std::vector<JoinRequest> pending_joins(KeyStore& store, const std::string& prefix, const Membership& world, int ids);
// Answers a request (and removes it, unless a newer one replaced it): `next` is the world the joiner is admitted to.
void answer_join(KeyStore& store, const std::string& prefix, const JoinRequest& r, const Membership& next);
// Refuses a request (and removes it): the joiner's wait ends with `reason` (await_join throws a UsageError).
void refuse_join(KeyStore& store, const std::string& prefix, const JoinRequest& r, const std::string& reason);
// The fields of two fingerprints ("key=value" lines) that differ, "model (live world: model=mlp, this rank:
// model=cnn), ..."; "" when equal.
std::string join_fingerprint_diff(const std::string& live, const std::string& joiner);
// What a supervisor that saw a rank's process end (the launcher) records: the rank is certainly lost, so survivors
// agreeing on a new world need not wait out their join window for it. Cleared when the rank is admitted again.
void report_lost(KeyStore& store, const std::string& prefix, int id, const std::string& how);
// The run is over: a joiner still waiting gives up at once.
void mark_run_done(KeyStore& store, const std::string& prefix);
// The joiner's wait for its answer: the world it joins. Throws QuorumLost (exit 3) when no answer came within
// wait_s or the run ended first, UsageError (exit 2) when the live world refused it; the message says which.
Membership await_join(KeyStore& store, const std::string& prefix, int me, const std::string& nonce, double wait_s,
                      double poll_s = 0.02);

}  // namespace dd::train
