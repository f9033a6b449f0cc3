// Helpers for the end-to-end tests: run the dreamddp binary (or any program) in a child process with a time
// bound, capturing exit status, stdout and stderr; temporary directories; small file and JSON utilities.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef DREAMDDP_BIN
#error "DREAMDDP_BIN must name the dreamddp binary under test"
#endif

#include "tests/common/tmp_dir.h"

namespace dd::cli::test {

inline const std::string kBin = DREAMDDP_BIN;

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using testing_common::TmpDir;

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p);
}

inline std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(line);
  return v;
}

struct Result {
  int status = -1;         // exit status; 128+signal if killed
  bool timed_out = false;  // killed by the bound (a hang: the test fails)
  double seconds = 0;
  std::string out, err;
  std::string last_stdout_line() const {
    auto l = lines_of(out);
    return l.empty() ? "" : l.back();
  }
  // For failure messages: what the run said.
  std::string describe() const {
    return "exit " + std::to_string(status) + (timed_out ? " (timed out)" : "") + " after " +
           std::to_string(seconds) + " s\n--- stderr ---\n" + err + "--- stdout (tail) ---\n" +
           (out.size() > 2000 ? out.substr(out.size() - 2000) : out);
  }
};

// Runs `program args...` (PATH lookup when program has no '/'), stdin from /dev/null, in its own process group
// so a timeout kills everything it started. Rank variables of the test's own environment are removed, so a
// single-process run is single-process wherever the suite runs; `env` adds NAME=VALUE entries.
inline Result run_program(const std::string& program, const std::vector<std::string>& args, double timeout_s = 60,
                          const std::vector<std::string>& env = {}) {
  char out_path[] = "/tmp/dd-cli-out-XXXXXX";
  char err_path[] = "/tmp/dd-cli-err-XXXXXX";
  const int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const double start = now_s();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "DREAMDDP_RENDEZVOUS"})
      unsetenv(v);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    std::vector<std::string> store = {program};
    store.insert(store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : store) argv.push_back(s.data());
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    std::fprintf(stderr, "exec %s failed\n", program.c_str());
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill below
  Result r;
  for (;;) {
    int st = 0;
    const pid_t got = waitpid(pid, &st, WNOHANG);
    if (got == pid) {
      r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (now_s() - start > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      r.timed_out = true;
      r.status = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = now_s() - start;
  close(out_fd);
  close(err_fd);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  unlink(out_path);
  unlink(err_path);
  return r;
}

// Runs the dreamddp binary under test.
inline Result run_dreamddp(const std::vector<std::string>& args, double timeout_s = 60,
                           const std::vector<std::string>& env = {}) {
  return run_program(kBin, args, timeout_s, env);
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  return nlohmann::json::parse(f);
}

// The keys CONTRACT.md promises in summary.json.
inline const std::vector<std::string>& summary_keys() {
  static const std::vector<std::string> k = {"model",  "policy",        "backend",    "world",
                                             "steps",  "params",        "samples_per_s", "final_loss",
                                             "test_accuracy", "comm_bytes", "exposed_comm_fraction"};
  return k;
}

}  // namespace dd::cli::test
