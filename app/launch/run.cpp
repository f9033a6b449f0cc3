// dd::launch::run: resolves the command, prepares (with --netem) the emulated cluster of one namespace per node,
// then per attempt (one, or up to 1 + --max-restarts) a rendezvous directory, starts the ranks with their
// torchrun-style environment and supervises them. Resources are owned by RAII objects declared in set-up order,
// so they go in reverse order on every exit path: ranks first, then the attempt's rendezvous directory, then the
// namespaces, and last the launcher's signal mask.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include "base/error.h"
#include "app/entry/self_exe.h"
#include "app/launch/launch.h"
#include "app/launch/rank_group.h"
#include "app/netem/emulated_cluster.h"
#include "app/netem/sys_command.h"
#include "backends/key_store.h"
#include "core/train/elastic.h"

extern char** environ;

namespace dd::launch {
namespace {

// Blocks the signals the supervisor waits for; on exit drains what is still pending (the launcher has already
// acted on it) and restores the previous mask.
class SignalBlock {
 public:
  SignalBlock() {
    sigemptyset(&set_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SignalBlock() {
    timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  const sigset_t& old_mask() const { return old_; }
  // A SIGINT/SIGTERM/SIGHUP that arrived during set-up (0 if none).
  int take_pending_stop() const {
    sigset_t stop;
    sigemptyset(&stop);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
    timespec zero{0, 0};
    const int sig = sigtimedwait(&stop, nullptr, &zero);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_, old_;
};

// The default rendezvous: a fresh directory for a file store, removed when the job ends.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/dreamddp-launch-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("cannot create a rendezvous directory " + tmpl + ": " + strerror(errno) +
                               " (set TMPDIR or pass --rendezvous)");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool is_subcommand(const std::string& s) {
  static const std::set<std::string> names = {"train", "bench", "profile", "schedule"};
  return names.count(s) > 0;
}

// A loopback port free right now (the kernel picks it); rank 0 binds it shortly after.
int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Whether a child may enter a UTS namespace of its own (root, or CAP_SYS_ADMIN), tried in a throw-away child.
bool can_set_hostname() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(unshare(CLONE_NEWUTS) == 0 ? 0 : 1);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::vector<std::string> rank_env(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& s : set) overridden = overridden || s.first == key;
    if (!overridden) env.push_back(kv);
  }
  for (const auto& s : set) env.push_back(s.first + "=" + s.second);
  return env;
}

// What every attempt starts: the program, the hosts and how the ranks are placed on them.
struct Job {
  int hosts = 1, per_host = 1;       // rank r runs on host r / per_host
  std::string exe;
  std::vector<std::string> argv;     // the next attempt's command line (a restart's resumes a checkpoint)
  bool shrink = false;               // `train --on-peer-loss shrink`: the survivors of a lost rank continue
  std::optional<RestartPlan> restarts;
  bool name_hosts = false;           // each rank gets its node's host name (needs a UTS namespace)
  std::string master_addr;
  const char* user_iface = nullptr;  // GLOO_SOCKET_IFNAME as the launcher got it
  const netem::EmulatedCluster* cluster = nullptr;
};

void check_ranks(const LaunchOptions& o, const std::vector<std::string>& cmd) {
  if (o.nprocs < 1) throw UsageError("-n must be at least 1, got " + std::to_string(o.nprocs));
  if (cmd.empty()) throw UsageError("nothing to run; give the command after '--'");
  if (o.nodes > 0 && (o.ranks_per_node < 1 || o.nodes * o.ranks_per_node != o.nprocs))
    throw UsageError("--nodes " + std::to_string(o.nodes) + "x" + std::to_string(o.ranks_per_node) +
                     " does not give -n " + std::to_string(o.nprocs) + " ranks");
}

// A dreamddp sub-command runs with this binary; anything else must be an executable file or on PATH.
void resolve_command(const LaunchOptions& o, const std::vector<std::string>& cmd, Job& job) {
  if (is_subcommand(cmd[0])) {
    job.exe = o.self_exe.empty() ? app::self_exe() : o.self_exe;
    job.argv.push_back(job.exe);
    job.argv.insert(job.argv.end(), cmd.begin(), cmd.end());
  } else {
    job.exe = netem::find_executable(cmd[0]);
    if (job.exe.empty())
      throw UsageError("cannot run '" + cmd[0] + "': not a dreamddp sub-command (train, bench, profile, "
                       "schedule) and not an executable " + (cmd[0].find('/') != std::string::npos ? "file" : "on PATH"));
    job.argv = cmd;
  }
}

// `train --on-peer-loss shrink`: the survivors of a lost rank continue, so the launcher lets them.
bool wants_shrink(const std::vector<std::string>& argv) {
  bool shrink = false;
  for (size_t i = 0; i < argv.size(); ++i)
    shrink = shrink || argv[i] == "--on-peer-loss=shrink" ||
             (argv[i] == "--on-peer-loss" && i + 1 < argv.size() && argv[i + 1] == "shrink");
  return shrink;
}

// The job as planned before anything starts: hosts, command, and (--max-restarts) the run directory and the
// command of a restart. Under shrink a lost rank is started again alone and rejoins the live world
// (docs/elastic.md "Rejoin"): no checkpoint.
Job plan_job(const LaunchOptions& o, const std::vector<std::string>& cmd) {
  check_ranks(o, cmd);
  Job job;
  // Hosts of the job: --nodes A, one per rank under a plain --netem (each rank its own machine), else this one.
  // Rank r runs on host r / per_host, consecutive ranks together (as hier:nodes=AxB groups them).
  job.hosts = o.nodes > 0 ? o.nodes : (o.netem ? o.nprocs : 1);
  job.per_host = o.nprocs / job.hosts;
  if (o.netem && job.hosts > 250) throw UsageError("--netem supports at most 250 nodes");
  resolve_command(o, cmd, job);
  job.shrink = wants_shrink(job.argv);
  if (o.max_restarts > 0) {
    if (!job.shrink) job.restarts = plan_restarts(cmd, job.argv);
    if (!o.rendezvous.empty() && o.rendezvous.rfind("file://", 0) != 0)
      throw UsageError("--max-restarts needs a file:// --rendezvous (each attempt gets a fresh directory under it) "
                       "or none, got " + o.rendezvous);
  }
  return job;
}

// Whether the ranks get their node's host name; says so on stderr when they should and cannot.
bool may_name_hosts(const LaunchOptions& o) {
  const bool name_hosts = (o.nodes > 0 || o.netem) && can_set_hostname();
  if ((o.nodes > 0 || o.netem) && !name_hosts) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "dreamddp launch: warning: cannot give the ranks their node's host name (a UTS namespace "
                 "needs root); all keep '%s', so --policy hier:nodes=auto sees one node: use hier:nodes=AxB\n", host);
  }
  return name_hosts;
}

// The attempt's rendezvous: --rendezvous (a subdirectory per restart), else a fresh directory held in `dir`.
std::string attempt_rendezvous(const LaunchOptions& o, int attempt, std::unique_ptr<TempDir>& dir) {
  std::string rendezvous = o.rendezvous;
  if (rendezvous.empty()) {
    dir = std::make_unique<TempDir>();
    rendezvous = "file://" + dir->path();
  } else if (attempt > 0) {
    rendezvous += "/restart" + std::to_string(attempt);
  }
  return rendezvous;
}

// Under shrink the launcher tells the survivors which rank it saw end, in their agreement's store (the file
// rendezvous, as `train` opens it: file or redis): they need not wait out their join window for it.
std::unique_ptr<KeyStore> open_shrink_store(const std::string& rendezvous) {
  try {
    return make_key_store(rendezvous, "shrink");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dreamddp launch: warning: no key store to report lost ranks in (%s); survivors wait "
                 "out their join window\n", e.what());
  }
  return nullptr;
}

// Which lost ranks may start again, and the record of each loss, through the shrink store.
void report_losses(RankGroup& group, KeyStore* store) {
  // Not once the run is over (the ranks mark it at the end), nor a joiner that gave up by itself: its request
  // is still unanswered, so no live world was there to admit it (starting it again would wait again).
  group.set_may_respawn([store](size_t r, int status) {
    std::string v;
    try {
      if (store->get("shrink/done", &v)) return false;
      return WIFSIGNALED(status) || !store->get("shrink/join/" + std::to_string(r), &v);
    } catch (const std::exception&) {
      return true;
    }
  });
  group.set_on_lost([store](size_t r, const std::string& how) {
    try {
      train::report_lost(*store, "shrink", int(r), "dreamddp launch: the process " + how);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dreamddp launch: cannot record the loss of rank %zu: %s\n", r, e.what());
    }
  });
}

// Rank r's program, environment (torchrun's variables and ours), namespace and host name.
RankSpec rank_spec(const Job& job, const LaunchOptions& o, int r, const std::string& rendezvous, int master_port,
                   const std::string& restart_note) {
  const int node = r / job.per_host;
  // Without --nodes every rank counts as local: the ranks share this machine's cores, and LOCAL_WORLD_SIZE is
  // what `train` sizes its default thread count by.
  const bool by_node = o.nodes > 0;
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(r)},
      {"WORLD_SIZE", std::to_string(o.nprocs)},
      {"LOCAL_RANK", std::to_string(by_node ? r % job.per_host : r)},
      {"LOCAL_WORLD_SIZE", std::to_string(by_node ? job.per_host : o.nprocs)},
      {"GROUP_RANK", std::to_string(node)},  // torchrun's name for the node index
      {"DREAMDDP_NODE", std::to_string(node)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"DREAMDDP_RENDEZVOUS", rendezvous},
  };
  RankSpec spec;
  if (job.cluster) {
    set.emplace_back("GLOO_SOCKET_IFNAME", job.cluster->iface());
    set.emplace_back("DREAMDDP_NETNS", job.cluster->netns(node));
    spec.netns_path = job.cluster->netns_path(node);
  } else if (!job.user_iface || !*job.user_iface) {
    set.emplace_back("GLOO_SOCKET_IFNAME", "lo");  // local ranks talk over loopback unless told otherwise
  }
  if (!restart_note.empty()) set.emplace_back("DREAMDDP_RESTART", restart_note);
  if (job.name_hosts) spec.hostname = "ddnode" + std::to_string(node);
  spec.exe = job.exe;
  spec.argv = job.argv;
  spec.env = rank_env(set);
  return spec;
}

// After a failed attempt: false when no restart is left (said on stderr), else the next attempt's note and
// command, resuming from the newest checkpoint that every rank holds intact.
bool plan_next_attempt(Job& job, const LaunchOptions& o, const RankGroup& group, int attempt,
                       std::string& restart_note) {
  const std::string cause = "rank " + std::to_string(group.failed_rank()) + " " + group.failure_cause();
  if (attempt >= o.max_restarts) {
    std::fprintf(stderr, "dreamddp launch: %s; no restarts left (%d of %d used): giving up\n", cause.c_str(),
                 attempt, o.max_restarts);
    return false;
  }
  const int64_t step = newest_complete_checkpoint(job.restarts->dir, o.nprocs);
  const std::string from = step >= 0 ? "the checkpoint after step " + std::to_string(step)
                                     : std::string("the start (no checkpoint that every rank holds intact)");
  restart_note = "restart " + std::to_string(attempt + 1) + " of " + std::to_string(o.max_restarts) + ": " + cause +
                 "; all " + std::to_string(o.nprocs) + " ranks from " + from;
  std::fprintf(stderr, "dreamddp launch: %s\n", restart_note.c_str());
  job.argv = restart_argv(*job.restarts, step);
  return true;
}

}  // namespace

int run(const LaunchOptions& o, const std::vector<std::string>& cmd) {
  Job job = plan_job(o, cmd);
  SignalBlock signals;
  std::unique_ptr<netem::EmulatedCluster> cluster;
  if (o.netem) cluster = std::make_unique<netem::EmulatedCluster>(job.hosts, *o.netem, o.iface_prefix);
  if (const int sig = signals.take_pending_stop()) return 128 + sig;
  job.name_hosts = may_name_hosts(o);
  job.cluster = cluster.get();
  job.master_addr = cluster ? cluster->address(0) : "127.0.0.1";
  job.user_iface = std::getenv("GLOO_SOCKET_IFNAME");

  std::string restart_note;  // DREAMDDP_RESTART of a restarted attempt: what the trainer logs in /events
  for (int attempt = 0;; ++attempt) {
    // Every attempt its own rendezvous (a store keeps the failed attempt's keys) and port.
    std::unique_ptr<TempDir> rdzv_dir;
    const std::string rendezvous = attempt_rendezvous(o, attempt, rdzv_dir);
    const int master_port = o.master_port ? o.master_port : (cluster ? 29500 : free_loopback_port());
    RankGroup group(signals.old_mask());
    group.set_keep_going(job.shrink);
    if (job.shrink) group.set_respawns(o.max_restarts);
    std::unique_ptr<KeyStore> shrink_store;
    if (job.shrink) shrink_store = open_shrink_store(rendezvous);
    if (shrink_store) report_losses(group, shrink_store.get());
    for (int r = 0; r < o.nprocs; ++r) group.spawn(rank_spec(job, o, r, rendezvous, master_port, restart_note));
    const int rc = group.supervise(o.grace_s);
    // A restart follows a rank that died (a signal, not our stop) or a job that lost a peer (exit 3); a usage
    // error, a crash with another status or an interrupted launcher ends the job as before.
    if (!job.restarts || rc == 0 || group.interrupted() || group.failed_rank() < 0) return rc;
    if (!group.failed_by_signal() && rc != 3) return rc;
    if (!plan_next_attempt(job, o, group, attempt, restart_note)) return 3;
  }
}

}  // namespace dd::launch
