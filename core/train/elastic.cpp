// The survivors' agreement of shrink without restart and the requests and answers of rejoin, on a key store.
#include "core/train/elastic.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/error.h"

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
std::string fingerprint_key(const std::string& prefix, int id, const std::string& nonce) {
  return prefix + "/joinfp/" + std::to_string(id) + "-" + nonce;
}
const char kRefused[] = "refused|";

// This rank's probes of the others, "id:1,id:0" (1: reached).
std::string encode_reach(const std::map<int, bool>& r) {
  std::string s;
  for (const auto& [id, ok] : r) s += (s.empty() ? "" : ",") + std::to_string(id) + ":" + (ok ? "1" : "0");
  return s;
}
std::map<int, bool> decode_reach(const std::string& s) {
  std::map<int, bool> r;
  std::istringstream in(s);
  for (std::string e; std::getline(in, e, ',');) {
    const auto c = e.find(':');
    if (c != std::string::npos) r[std::stoi(e.substr(0, c))] = e.substr(c + 1) == "1";
  }
  return r;
}

// The reported members that at least half of the other reporters who probed them reached (all of them when none
// probed); *complete: every reporter has published its probes of all the others.
std::vector<int> reached_members(KeyStore& store, const std::string& base, const std::vector<int>& seen,
                                 bool* complete, std::vector<int>* fenced) {
  std::map<int, std::map<int, bool>> probes;
  *complete = true;
  for (int r : seen) {
    std::string v;
    if (store.get(base + "/reach/" + std::to_string(r), &v)) probes[r] = decode_reach(v);
    for (int m : seen)
      if (m != r && !probes[r].count(m)) *complete = false;
  }
  std::vector<int> kept;
  for (int m : seen) {
    int asked = 0, reached = 0;
    for (int r : seen) {
      if (r == m || !probes[r].count(m)) continue;
      ++asked;
      reached += probes[r][m] ? 1 : 0;
    }
    if (2 * reached >= asked) kept.push_back(m);
    else if (fenced) fenced->push_back(m);
  }
  return kept;
}

}  // namespace

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

Membership agree_survivors(KeyStore& store, const std::string& prefix, const Membership& old, int me,
                           int64_t failed_step, const AgreeTiming& timing, const ReachCheck* reach) {
  const int gen = old.generation + 1;
  const std::string base = prefix + "/g" + std::to_string(gen);
  const size_t n = old.members.size();
  if (reach) store.set(base + "/probe/" + std::to_string(me), reach->address);
  store.set(base + "/alive/" + std::to_string(me), std::to_string(failed_step));
  const double t0 = now_s();
  std::vector<int> seen;
  std::map<int, bool> mine;  // this rank's probes of the others
  std::vector<int> kept;     // the reported members that reach one another (all of them without probes)
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
    kept = seen;
    bool complete = true;
    if (reach) {
      bool more = false;
      for (int id : seen) {
        std::string a;
        if (id == me || mine.count(id) || !store.get(base + "/probe/" + std::to_string(id), &a)) continue;
        mine[id] = reach->reaches(a);
        more = true;
      }
      if (more) store.set(base + "/reach/" + std::to_string(me), encode_reach(mine));
      kept = reached_members(store, base, seen, &complete, nullptr);
    }
    const double waited = now_s() - t0;
    const bool quorum = 2 * kept.size() > n;
    const bool everyone = seen.size() == n || seen.size() + certainly_lost == n;
    if (quorum && ((everyone && complete) || waited >= timing.join_s)) {
      decided = decode(store.claim(base + "/decision", encode(kept, step)), gen);
      break;
    }
    if (waited >= timing.join_s + timing.decide_s) {
      const std::string need = "; a new world needs more than half (" + std::to_string(n / 2 + 1) + ")";
      if (kept.size() < seen.size())
        throw QuorumLost("on-peer-loss shrink: no quorum: of the " + std::to_string(seen.size()) + " ranks of " +
                         "generation " + std::to_string(old.generation) + " that reported (rank " + join_ranks(seen) +
                         "), only " + std::to_string(kept.size()) + " reach enough of the others on the ranks' " +
                         "network" + need);
      throw QuorumLost("on-peer-loss shrink: no quorum: only " + std::to_string(seen.size()) + " of the " +
                       std::to_string(n) + " ranks of generation " + std::to_string(old.generation) + " (" +
                       (seen.empty() ? std::string("none") : "rank " + join_ranks(seen)) + ") reported within " +
                       std::to_string(int(timing.join_s + timing.decide_s)) + " s" + need);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(timing.poll_s));
  }
  if (std::find(decided.members.begin(), decided.members.end(), me) == decided.members.end()) {
    std::vector<int> reported, fenced;
    std::string v;
    for (int id : old.members)
      if (store.get(base + "/alive/" + std::to_string(id), &v)) reported.push_back(id);
    bool complete = true;
    if (reach) reached_members(store, base, reported, &complete, &fenced);
    const bool cut_off = std::find(fenced.begin(), fenced.end(), me) != fenced.end();
    throw Excluded("on-peer-loss shrink: excluded: rank " + join_ranks(decided.members) + " (" +
                     std::to_string(decided.members.size()) + " of " + std::to_string(n) +
                     ", a quorum) formed generation " + std::to_string(gen) + " without this rank (started as rank " +
                     std::to_string(me) + ")" +
                     (cut_off ? "; fewer than half of the others reached it on the ranks' network (a partition?)" : ""));
  }
  return decided;
}

std::string process_nonce() { return std::to_string(::getpid()) + "-" + std::to_string(int64_t(now_s() * 1e6)); }

// A request's value: "nonce" or "nonce address".
void post_join(KeyStore& store, const std::string& prefix, int me, const std::string& nonce,
               const std::string& address, const std::string& fingerprint) {
  if (!fingerprint.empty()) store.set(fingerprint_key(prefix, me, nonce), fingerprint);  // before the request
  store.set(prefix + "/join/" + std::to_string(me), address.empty() ? nonce : nonce + " " + address);
}

std::vector<JoinRequest> pending_joins(KeyStore& store, const std::string& prefix, const Membership& world, int ids) {
  std::vector<JoinRequest> out;
  for (int id = 0; id < ids; ++id) {
    if (std::find(world.members.begin(), world.members.end(), id) != world.members.end()) continue;
    JoinRequest r{id, {}, {}};
    std::string v;
    if (!store.get(prefix + "/join/" + std::to_string(id), &v) || v.empty()) continue;
    const auto sp = v.find(' ');
    r.nonce = v.substr(0, sp);
    if (sp != std::string::npos) r.address = v.substr(sp + 1);
    store.get(fingerprint_key(prefix, id, r.nonce), &r.fingerprint);
    out.push_back(r);
  }
  return out;
}

void answer_join(KeyStore& store, const std::string& prefix, const JoinRequest& r, const Membership& next) {
  store.remove(prefix + "/lost/" + std::to_string(r.id));  // a member again: a later loss is a new report
  store.set(answer_key(prefix, r.id, r.nonce), encode_world(next));
  // A request posted since (the rank started once more) stays for the next check.
  std::string now;
  if (store.get(prefix + "/join/" + std::to_string(r.id), &now) && now.substr(0, now.find(' ')) == r.nonce)
    store.remove(prefix + "/join/" + std::to_string(r.id));
}

void refuse_join(KeyStore& store, const std::string& prefix, const JoinRequest& r, const std::string& reason) {
  store.set(answer_key(prefix, r.id, r.nonce), kRefused + reason);
  store.remove(fingerprint_key(prefix, r.id, r.nonce));
  std::string now;
  if (store.get(prefix + "/join/" + std::to_string(r.id), &now) && now.substr(0, now.find(' ')) == r.nonce)
    store.remove(prefix + "/join/" + std::to_string(r.id));
}

std::string join_fingerprint_diff(const std::string& live, const std::string& joiner) {
  if (live == joiner) return "";
  auto fields = [](const std::string& s) {
    std::map<std::string, std::string> f;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) f[line.substr(0, line.find('='))] = line;
    return f;
  };
  const auto a = fields(live), b = fields(joiner);
  std::map<std::string, int> keys;
  for (const auto& [k, v] : a) keys[k] = 1;
  for (const auto& [k, v] : b) keys[k] = 1;
  std::string diff;
  for (const auto& [k, one] : keys) {
    const std::string x = a.count(k) ? a.at(k) : "none", y = b.count(k) ? b.at(k) : "none";
    if (x != y) diff += (diff.empty() ? "" : ", ") + k + " (live world: " + x + ", this rank: " + y + ")";
  }
  return diff.empty() ? "fields differ" : diff;
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
      if (v.compare(0, sizeof(kRefused) - 1, kRefused) == 0) {
        store.remove(answer_key(prefix, me, nonce));
        throw UsageError("rejoin: the live world refused rank " + std::to_string(me) + ": " +
                         v.substr(sizeof(kRefused) - 1));
      }
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
