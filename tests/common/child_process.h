// A child process for the process-level tests (tests/cli, tests/faults): started in its own process group with a
// clean rank environment plus extra NAME=VALUE entries, stdin from /dev/null, stdout/stderr to files, waited for
// with a deadline; the destructor SIGKILLs its whole group so a failed test leaves nothing running.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dd::testing_common {

inline double mono_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ChildProcess {
 public:
  // Rank, rendezvous and job variables of the test's own environment are dropped so only `env` (NAME=VALUE) places
  // the child. `program` without a '/' is looked up in PATH.
  ChildProcess(const std::string& program, const std::vector<std::string>& args, const std::vector<std::string>& env,
               const std::string& out_path, const std::string& err_path)
      : out_path_(out_path), err_path_(err_path) {
    const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out_fd < 0 || err_fd < 0) throw std::runtime_error("cannot create " + out_path + " / " + err_path);
    std::fflush(stdout);
    std::fflush(stderr);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      setpgid(0, 0);
      const int null_fd = open("/dev/null", O_RDONLY);
      dup2(null_fd, 0);
      dup2(out_fd, 1);
      dup2(err_fd, 2);
      for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                            "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_LOCALID",
                            "DREAMDDP_RENDEZVOUS", "DREAMDDP_JOB", "SLURM_JOB_ID", "SLURM_STEP_ID",
                            "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID", "GLOO_SOCKET_IFNAME"})
        unsetenv(v);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      std::vector<std::string> store = {program};
      store.insert(store.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : store) argv.push_back(s.data());
      argv.push_back(nullptr);
      execvp(program.c_str(), argv.data());
      std::fprintf(stderr, "exec %s failed: %s\n", program.c_str(), std::strerror(errno));
      _exit(127);
    }
    setpgid(pid_, pid_);
    close(out_fd);
    close(err_fd);
  }
  ~ChildProcess() {
    if (!reaped_) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  void kill_group() const { kill(-pid_, SIGKILL); }
  std::string out() const { return slurp(out_path_); }
  std::string err() const { return slurp(err_path_); }

  // Exit status (128+signal when killed by one), or -1 if it is still running after `timeout_s`.
  int wait_for(double timeout_s) {
    if (reaped_) return status_;
    const double end = mono_s() + timeout_s;
    for (;;) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      if (mono_s() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Waits until stderr contains `needle` (true) or the process ends or `timeout_s` passes (false).
  bool wait_for_stderr(const std::string& needle, double timeout_s) {
    const double end = mono_s() + timeout_s;
    while (mono_s() < end) {
      if (err().find(needle) != std::string::npos) return true;
      if (wait_for(0) >= 0) return err().find(needle) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

}  // namespace dd::testing_common
