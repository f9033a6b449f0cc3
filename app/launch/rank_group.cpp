// Process supervision for `dreamddp launch` (see rank_group.h). Single-threaded: signals are taken with
// sigtimedwait while blocked, so there are no async handlers and no races with reaping.
#include "app/launch/rank_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace dd::launch {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int decode_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

std::string describe_status(int st) {
  // Exit 2 is the CLI's refusal of bad usage or input (docs/cli.md): the rank refused its set-up, no peer was lost.
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) return "exited with status 2 (its set-up was refused)";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 4) return "exited with status 4 (an anomaly every rank agreed on, --anomaly stop)";
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  const int sig = WTERMSIG(st);
  return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
}

void child_fail(const char* what) {
  // Only async-signal-safe calls between fork and exec.
  const char* msg = "dreamddp launch: rank start-up failed: ";
  (void)!write(2, msg, std::strlen(msg));
  (void)!write(2, what, std::strlen(what));
  (void)!write(2, ": ", 2);
  const char* err = strerror(errno);
  (void)!write(2, err, std::strlen(err));
  (void)!write(2, "\n", 1);
  _exit(127);
}

}  // namespace

void RankGroup::spawn(const RankSpec& spec) {
  specs_.push_back(spec);
  children_.push_back({start(spec), true, 0});
}

pid_t RankGroup::start(const RankSpec& spec) {
  // Everything the child needs is prepared here: after fork only async-signal-safe calls are allowed.
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int ns_fd = -1;
  if (!spec.netns_path.empty()) {
    ns_fd = open(spec.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0)
      throw std::runtime_error("cannot open network namespace " + spec.netns_path + ": " + strerror(errno));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    if (ns_fd >= 0) close(ns_fd);
    if (null_fd >= 0) close(null_fd);
    throw std::runtime_error(std::string("fork failed: ") + strerror(err));
  }
  if (pid == 0) {
    setpgid(0, 0);
    // If the launcher is killed outright (SIGKILL), the ranks must not outlive it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (ns_fd >= 0 && setns(ns_fd, CLONE_NEWNET) != 0) child_fail("setns");
    // The node's host name, in a UTS namespace of its own: what gethostname() (hier:nodes=auto) groups by.
    if (!spec.hostname.empty()) {
      if (unshare(CLONE_NEWUTS) != 0) child_fail("unshare(CLONE_NEWUTS)");
      if (sethostname(spec.hostname.data(), spec.hostname.size()) != 0) child_fail("sethostname");
    }
    // Ranks do not read stdin; a background process group reading the terminal would be stopped.
    if (null_fd >= 0) dup2(null_fd, 0);
    // The stop signals the launcher forwards take their default action in a rank. A launcher started in the
    // background by a non-interactive shell (`dreamddp launch ... &` in a script) has SIGINT and SIGQUIT ignored,
    // and an ignored disposition survives exec: the ranks would ignore the SIGINT forwarded to them.
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) sigaction(s, &dfl, nullptr);
    sigprocmask(SIG_SETMASK, &child_mask_, nullptr);
    execve(spec.exe.c_str(), argv.data(), envp.data());
    child_fail(spec.exe.c_str());
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  if (ns_fd >= 0) close(ns_fd);
  if (null_fd >= 0) close(null_fd);
  return pid;
}

bool RankGroup::respawn(size_t r, int st) {
  if (respawns_left_ <= 0 || stopping_ || launcher_signal_ != 0) return false;
  if (!WIFSIGNALED(st) && decode_status(st) != 3) return false;  // lost or left the world; not a usage error or crash
  bool live = false;
  for (const auto& c : children_) {
    if (!c.running && decode_status(c.status) == 0) return false;  // the run is finishing
    live = live || c.running;
  }
  if (!live) return false;  // no world left to join
  if (may_respawn_ && !may_respawn_(r, st)) return false;
  RankSpec spec = specs_[r];
  spec.env.push_back("DREAMDDP_REJOIN=1");
  --respawns_left_;
  ++respawned_;
  children_[r] = {start(spec), true, 0};
  std::fprintf(stderr, "dreamddp launch: starting rank %zu again (pid %d, restart %d of %d); it rejoins the live "
               "world\n", r, static_cast<int>(children_[r].pid), respawned_, respawned_ + respawns_left_);
  return true;
}

void RankGroup::signal_all(int sig) {
  for (const auto& c : children_)
    if (c.running) {
      kill(-c.pid, sig);
      // A stopped (hung) rank only acts on SIGTERM once it runs again; without this it costs the whole grace.
      if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) kill(-c.pid, SIGCONT);
    }
}

void RankGroup::reap() {
  // Every rank that has ended is reaped first, so the messages below count only the ranks still running.
  std::vector<size_t> ended;
  for (size_t r = 0; r < children_.size(); ++r) {
    Child& c = children_[r];
    if (!c.running) continue;
    int st = 0;
    const pid_t got = waitpid(c.pid, &st, WNOHANG);
    if (got != c.pid) continue;
    c.running = false;
    c.status = st;
    kill(-c.pid, SIGKILL);  // whatever the rank left running in its process group
    ended.push_back(r);
  }
  for (size_t r : ended) {
    Child& c = children_[r];
    const int st = c.status;
    // Under shrink the others go on without a rank that was lost or left the world; one that refused its set-up
    // (exit 2: bad usage or input, the same on every rank) or stopped on an agreed anomaly (exit 4, --anomaly stop:
    // every rank stops at the same step) ends the job as without shrink.
    const int code = decode_status(st);
    if (keep_going_ && code != 0 && code != 2 && code != 4 && !stopping_) {
      if (first_failure_ < 0) first_failure_ = static_cast<int>(r);
      int others = 0;
      for (const auto& o : children_) others += o.running ? 1 : 0;
      std::fprintf(stderr, "dreamddp launch: rank %zu (pid %d) %s; the other %d rank(s) continue without it "
                   "(--on-peer-loss shrink)\n", r, static_cast<int>(c.pid), describe_status(st).c_str(), others);
      if (on_lost_) on_lost_(r, describe_status(st));
      respawn(r, st);
      continue;
    }
    if (decode_status(st) == 0 || first_failure_ >= 0) continue;
    first_failure_ = static_cast<int>(r);
    int others = 0;
    for (const auto& o : children_) others += o.running ? 1 : 0;
    if (launcher_signal_ == 0 && others > 0) {
      std::fprintf(stderr, "dreamddp launch: rank %zu (pid %d) %s; stopping the other %d rank(s)\n", r,
                   static_cast<int>(c.pid), describe_status(st).c_str(), others);
    } else if (launcher_signal_ == 0) {
      std::fprintf(stderr, "dreamddp launch: rank %zu (pid %d) %s; no other rank is running\n", r,
                   static_cast<int>(c.pid), describe_status(st).c_str());
    }
    if (!stopping_) {
      stopping_ = true;
      stop_signal_ = SIGTERM;
      signal_all(SIGTERM);
    }
  }
}

int RankGroup::supervise(double grace_s) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  double kill_at = 0, abandon_at = 0;
  bool killed = false;
  for (;;) {
    reap();
    bool any = false;
    for (const auto& c : children_) any = any || c.running;
    if (!any) break;
    const double now = now_s();
    if (stopping_ && kill_at == 0) kill_at = now + grace_s;
    if (stopping_ && !killed && now >= kill_at) {
      std::string left;
      for (size_t r = 0; r < children_.size(); ++r)
        if (children_[r].running) left += " " + std::to_string(r);
      std::fprintf(stderr, "dreamddp launch: rank(s)%s still running %g s after SIG%s; sending SIGKILL\n",
                   left.c_str(), grace_s, sigabbrev_np(stop_signal_));
      signal_all(SIGKILL);
      killed = true;
      abandon_at = now + 5;
    }
    if (killed && now >= abandon_at) {
      // Unkillable (uninterruptible sleep); do not hang the launcher on it.
      std::fprintf(stderr, "dreamddp launch: some ranks did not die after SIGKILL; giving up on them\n");
      for (auto& c : children_) c.running = false;
      break;
    }
    double wait = 1.0;
    if (stopping_) wait = (killed ? abandon_at : kill_at) - now;
    if (wait < 0.001) wait = 0.001;
    if (wait > 1.0) wait = 1.0;
    timespec ts{static_cast<time_t>(wait), static_cast<long>((wait - static_cast<time_t>(wait)) * 1e9)};
    siginfo_t info;
    const int sig = sigtimedwait(&set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (launcher_signal_ == 0) {
        launcher_signal_ = sig;
        int running = 0;
        for (const auto& c : children_) running += c.running ? 1 : 0;
        std::fprintf(stderr, "dreamddp launch: got SIG%s; forwarding it to %d rank(s)\n", sigabbrev_np(sig), running);
        signal_all(sig);
        if (!stopping_) stop_signal_ = sig;
        stopping_ = true;
      } else if (!killed) {
        // A second interrupt means "now": skip the grace period.
        signal_all(SIGKILL);
        killed = true;
        abandon_at = now_s() + 5;
      }
    }
  }
  if (keep_going_ && first_failure_ >= 0 && launcher_signal_ == 0) {
    // The job succeeded when a quorum finished: some rank exited 0, and the others were lost (a signal) or left
    // the world (exit 3). Anything else (a usage error, a crash) is the job's status, as without shrink.
    bool finished = false, lost_only = true;
    for (const auto& c : children_) {
      const int rc = decode_status(c.status);
      finished = finished || rc == 0;
      lost_only = lost_only && (rc == 0 || rc == 3 || WIFSIGNALED(c.status));
    }
    if (finished && lost_only) return 0;
  }
  if (first_failure_ >= 0) return decode_status(children_[first_failure_].status);
  if (launcher_signal_ != 0) return 128 + launcher_signal_;
  return 0;
}

bool RankGroup::failed_by_signal() const {
  return first_failure_ >= 0 && WIFSIGNALED(children_[first_failure_].status);
}

std::string RankGroup::failure_cause() const {
  return first_failure_ >= 0 ? describe_status(children_[first_failure_].status) : std::string();
}

RankGroup::~RankGroup() {
  for (auto& c : children_) {
    if (!c.running) continue;
    kill(-c.pid, SIGKILL);
    kill(c.pid, SIGKILL);
    int st = 0;
    while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
    }
    c.running = false;
  }
}

}  // namespace dd::launch
