// The survivors' agreement of shrink without restart and the requests and answers of rejoin, on a key store.
#include "core/train/elastic.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "core/common/clock.h"

namespace dd::train {
namespace {

// "ids;step", e.g. "0,2,3;17".
std::string encode(const std::vector<int>& ids, int64_t step) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + ";" + std::to_string(step);
}

Membership decode(const std::string& s, int generation) {
  Membership m;
  m.generation = generation;
  const auto semi = s.find(';');
  if (semi == std::string::npos) throw PeerLost("rendezvous store: malformed decision '" + s + "'");
  std::istringstream ids(s.substr(0, semi));
  for (std::string id; std::getline(ids, id, ',');) m.members.push_back(std::stoi(id));
  m.step = std::stoll(s.substr(semi + 1));
  return m;
}

// A joiner's answer: "generation|ids;step".
std::string encode_world(const Membership& m) { return std::to_string(m.generation) + "|" + encode(m.members, m.step); }
Membership decode_world(const std::string& s) {
  const auto bar = s.find('|');
  if (bar == std::string::npos) throw PeerLost("rendezvous store: malformed join answer '" + s + "'");
  return decode(s.substr(bar + 1), std::stoi(s.substr(0, bar)));
}
std::string answer_key(const std::string& prefix, int id, const std::string& nonce) {
  return prefix + "/joined/" + std::to_string(id) + "-" + nonce;
}

}  // namespace

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

Membership agree_survivors(KeyStore& store, const std::string& prefix, const Membership& old, int me,
                           int64_t failed_step, const AgreeTiming& timing) {
  const int gen = old.generation + 1;
  const std::string base = prefix + "/g" + std::to_string(gen);
  const size_t n = old.members.size();
  store.set(base + "/alive/" + std::to_string(me), std::to_string(failed_step));
  const double t0 = now_s();
  std::vector<int> seen;
  Membership decided;
  for (;;) {
    std::string d;
    if (store.get(base + "/decision", &d)) {
      decided = decode(d, gen);
      break;
    }
    seen.clear();
    int64_t step = -1;
    size_t certainly_lost = 0;
    for (int id : old.members) {
      std::string v;
      if (!store.get(base + "/alive/" + std::to_string(id), &v)) {
        certainly_lost += store.get(prefix + "/lost/" + std::to_string(id), &v) ? 1 : 0;
        continue;
      }
      seen.push_back(id);
      step = std::max<int64_t>(step, std::stoll(v));
    }
    const double waited = now_s() - t0;
    const bool quorum = 2 * seen.size() > n;
    if (seen.size() == n || (quorum && (waited >= timing.join_s || seen.size() + certainly_lost == n))) {
      decided = decode(store.claim(base + "/decision", encode(seen, step)), gen);
      break;
    }
    if (waited >= timing.join_s + timing.decide_s)
      throw QuorumLost("on-peer-loss shrink: no quorum: only " + std::to_string(seen.size()) + " of the " +
                       std::to_string(n) + " ranks of generation " + std::to_string(old.generation) + " (" +
                       (seen.empty() ? std::string("none") : "rank " + join_ranks(seen)) + ") reported within " +
                       std::to_string(int(timing.join_s + timing.decide_s)) + " s; a new world needs more than half (" +
                       std::to_string(n / 2 + 1) + ")");
    std::this_thread::sleep_for(std::chrono::duration<double>(timing.poll_s));
  }
  if (std::find(decided.members.begin(), decided.members.end(), me) == decided.members.end())
    throw QuorumLost("on-peer-loss shrink: excluded: rank " + join_ranks(decided.members) + " (" +
                     std::to_string(decided.members.size()) + " of " + std::to_string(n) +
                     ", a quorum) formed generation " + std::to_string(gen) + " without this rank (started as rank " +
                     std::to_string(me) + ")");
  return decided;
}

void post_join(KeyStore& store, const std::string& prefix, int me, const std::string& nonce) {
  store.set(prefix + "/join/" + std::to_string(me), nonce);
}

std::vector<JoinRequest> pending_joins(KeyStore& store, const std::string& prefix, const Membership& world, int ids) {
  std::vector<JoinRequest> out;
  for (int id = 0; id < ids; ++id) {
    if (std::find(world.members.begin(), world.members.end(), id) != world.members.end()) continue;
    JoinRequest r{id, {}};
    if (store.get(prefix + "/join/" + std::to_string(id), &r.nonce) && !r.nonce.empty()) out.push_back(r);
  }
  return out;
}

void answer_join(KeyStore& store, const std::string& prefix, const JoinRequest& r, const Membership& next) {
  store.remove(prefix + "/lost/" + std::to_string(r.id));  // a member again: a later loss is a new report
  store.set(answer_key(prefix, r.id, r.nonce), encode_world(next));
  // A request posted since (the rank started once more) stays for the next check.
  std::string now;
  if (store.get(prefix + "/join/" + std::to_string(r.id), &now) && now == r.nonce)
    store.remove(prefix + "/join/" + std::to_string(r.id));
}

void report_lost(KeyStore& store, const std::string& prefix, int id, const std::string& how) {
  store.set(prefix + "/lost/" + std::to_string(id), how);
}

void mark_run_done(KeyStore& store, const std::string& prefix) { store.set(prefix + "/done", "1"); }

Membership await_join(KeyStore& store, const std::string& prefix, int me, const std::string& nonce, double wait_s,
                      double poll_s) {
  const double t0 = now_s();
  for (;;) {
    std::string v;
    if (store.get(answer_key(prefix, me, nonce), &v)) {
      Membership m = decode_world(v);
      if (std::find(m.members.begin(), m.members.end(), me) == m.members.end())
        throw PeerLost("rejoin: the answer to rank " + std::to_string(me) + " does not name it: " + v);
      return m;
    }
    if (store.get(prefix + "/done", &v))
      throw QuorumLost("rejoin: the run ended before rank " + std::to_string(me) + " could join it");
    if (now_s() - t0 >= wait_s)
      throw QuorumLost("rejoin: no live world admitted rank " + std::to_string(me) + " within " +
                       std::to_string(int(wait_s)) + " s (is a run with --on-peer-loss shrink going on under this "
                       "rendezvous?)");
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

}  // namespace dd::train
