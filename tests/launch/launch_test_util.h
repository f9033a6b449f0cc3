// Helpers for the launcher tests: run `dreamddp launch` in a forked child (stderr captured to a file), wait for
// it with a bound, send it signals, and inspect files and processes.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "app/launch/launch.h"

namespace dd::launch::test {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A temporary directory removed at the end of the test.
struct TmpDir {
  std::string path;
  TmpDir() {
    std::string t = "/tmp/dd-launch-test-XXXXXX";
    if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path = t;
    chmod(path.c_str(), 0777);  // the non-root test writes here too
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

inline void write_file(const std::string& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

// True when the process exists and is not a zombie (orphans may be left unreaped by a container's pid 1).
inline bool pid_alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Whether the process is gone within timeout_s (a SIGKILLed process needs a moment to finish dying).
inline bool pid_gone_within(pid_t pid, double timeout_s) {
  const double end = now_s() + timeout_s;
  while (pid_alive(pid)) {
    if (now_s() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Waits until every path exists (or the timeout passes); returns whether they all do.
inline bool wait_for_files(const std::vector<std::string>& paths, double timeout_s) {
  const double end = now_s() + timeout_s;
  for (;;) {
    bool all = true;
    for (const auto& p : paths) all = all && exists(p);
    if (all) return true;
    if (now_s() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The launcher running in a forked child; its stderr goes to `err_path`.
struct Launcher {
  pid_t pid = -1;
  std::string err_path;
  int status = -1;      // decoded exit status once finished (128+sig if killed)
  double elapsed = 0;   // seconds from start to exit

  // args: what follows "launch" on the command line. uid >= 0: drop to that uid first (non-root checks).
  Launcher(const std::vector<std::string>& args, const std::string& err, int uid = -1) : err_path(err) {
    start_ = now_s();
    std::fflush(stdout);
    std::fflush(stderr);
    pid = fork();
    if (pid == 0) {
      FILE* f = std::freopen(err.c_str(), "w", stderr);
      (void)f;
      if (uid >= 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(99);
      std::vector<std::string> store = {"launch"};
      store.insert(store.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : store) argv.push_back(s.data());
      argv.push_back(nullptr);
      int rc = 1;
      try {
        rc = cli_main(static_cast<int>(store.size()), argv.data());
      } catch (const dd::UsageError& e) {  // as app/main.cpp maps them
        std::fprintf(stderr, "dreamddp launch: error: %s\n", e.what());
        rc = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dreamddp launch: error: %s\n", e.what());
        rc = 1;
      }
      std::fflush(stderr);
      _exit(rc);
    }
  }
  // Waits at most timeout_s; on timeout kills the launcher and returns false (the test then fails).
  bool wait(double timeout_s) {
    const double end = now_s() + timeout_s;
    for (;;) {
      int st = 0;
      const pid_t got = waitpid(pid, &st, WNOHANG);
      if (got == pid) {
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        elapsed = now_s() - start_;
        return true;
      }
      if (now_s() > end) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::string stderr_text() const { return read_file(err_path); }

 private:
  double start_ = 0;
};

}  // namespace dd::launch::test
