// Starting and supervising the ranks of one launch: each rank runs in its own process group (so a rank's own
// children are signalled with it), signals reaching the launcher are forwarded, and the first rank that fails
// takes the others down (SIGTERM, then SIGKILL after a grace period).
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace dd::launch {

struct RankSpec {
  std::string exe;                // absolute path of the program
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // complete environment, "KEY=VALUE"
  std::string netns_path;         // network namespace to enter (/run/netns/NAME); empty = the launcher's
  std::string hostname;           // set in a UTS namespace of the rank's own (root); empty = the host's name
};

class RankGroup {
 public:
  // child_mask: the signal mask the ranks start with (the launcher's mask before it blocked its signals).
  // The caller must have blocked SIGCHLD, SIGINT, SIGTERM and SIGHUP in this thread.
  explicit RankGroup(const sigset_t& child_mask) : child_mask_(child_mask) {}
  ~RankGroup();  // kills (SIGKILL) and reaps any rank still running: never leaves processes behind
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  // `train --on-peer-loss shrink`: a rank that fails does not take the others down (they continue without it);
  // supervise() then returns 0 when some rank exited 0 and every other one exited 3 or died by a signal.
  void set_keep_going(bool on) { keep_going_ = on; }
  // With keep-going: a rank that was killed or left the world (exit 3) is started again, up to `n` times in all,
  // with DREAMDDP_REJOIN=1 (`train --rejoin`: it joins the live world), unless some rank has finished already or
  // no rank is running (no world left to join).
  void set_respawns(int n) { respawns_left_ = n; }
  // With keep-going: called when a rank's process ends with a failure (rank, "was killed by signal 9 (Killed)").
  void set_on_lost(std::function<void(size_t, const std::string&)> fn) { on_lost_ = std::move(fn); }
  // With respawns: false when rank `r`, ended with wait status `status`, must not be started again (the run is
  // over, or it was a joiner that gave up waiting for a world to admit it).
  void set_may_respawn(std::function<bool(size_t, int)> fn) { may_respawn_ = std::move(fn); }

  void spawn(const RankSpec& spec);  // the next rank; throws std::runtime_error when fork or opening the netns fails

  // Waits until every rank has exited. Returns 0, the first failing rank's status (128+signal if it was
  // killed), or 128+signal when the launcher was signalled and every rank exited 0.
  int supervise(double grace_s);

  // After supervise(): the first rank that failed (-1: none), whether a signal killed it, and what happened to it
  // ("was killed by signal 9 (Killed)", "exited with status 3"); whether the launcher itself was signalled.
  int failed_rank() const { return first_failure_; }
  bool failed_by_signal() const;
  std::string failure_cause() const;
  bool interrupted() const { return launcher_signal_ != 0; }

 private:
  struct Child {
    pid_t pid = -1;
    bool running = false;
    int status = 0;
  };
  pid_t start(const RankSpec& spec);
  bool respawn(size_t r, int status);
  void signal_all(int sig);
  void reap();

  sigset_t child_mask_;
  std::vector<Child> children_;
  std::vector<RankSpec> specs_;
  int respawns_left_ = 0, respawned_ = 0;
  std::function<void(size_t, const std::string&)> on_lost_;
  std::function<bool(size_t, int)> may_respawn_;
  int first_failure_ = -1;   // rank
  int launcher_signal_ = 0;  // first SIGINT/SIGTERM/SIGHUP received
  bool stopping_ = false;
  bool keep_going_ = false;
  int stop_signal_ = SIGTERM;  // what the ranks were asked to stop with (for messages)
};

}  // namespace dd::launch
