// Test helper: run N ranks as forked processes; each child runs fn(rank) and exits with its return value.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

namespace dd::test {

// Returns each rank's exit status (or 128+signal); kills children still running after `limit_s`
// (reported as -1) so a hanging backend fails the test instead of the whole suite.
inline std::vector<int> fork_ranks(int n, const std::function<int(int)>& fn, double limit_s = 60) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = fn(r);
      } catch (...) {
        code = 99;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(n, -1);
  auto t0 = std::chrono::steady_clock::now();
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] == 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[r] = 0;
        --left;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) {
      for (pid_t p : pids)
        if (p) kill(p, SIGKILL), waitpid(p, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

}  // namespace dd::test
