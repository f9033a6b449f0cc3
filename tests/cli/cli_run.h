// Helpers for the end-to-end tests: run the dreamddp binary (or any program) in a child process with a time
// bound, capturing exit status, stdout and stderr; temporary directories; small file and JSON utilities.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef DREAMDDP_BIN
#error "DREAMDDP_BIN must name the dreamddp binary under test"
#endif

#include "tests/common/child_process.h"
#include "tests/common/tmp_dir.h"

namespace dd::cli::test {

inline const std::string kBin = DREAMDDP_BIN;

using testing_common::TmpDir;
inline double now_s() { return testing_common::mono_s(); }
inline std::string read_file(const std::string& p) { return testing_common::slurp(p); }

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

// Runs `program args...` to completion (testing_common::ChildProcess: own process group, clean rank environment,
// `env` NAME=VALUE entries added); past `timeout_s` the whole group is killed and the result says timed_out.
inline Result run_program(const std::string& program, const std::vector<std::string>& args, double timeout_s = 60,
                          const std::vector<std::string>& env = {}) {
  char dir[] = "/tmp/dd-cli-XXXXXX";
  if (!mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
  const std::string out_path = std::string(dir) + "/out", err_path = std::string(dir) + "/err";
  Result r;
  {
    const double start = now_s();
    testing_common::ChildProcess child(program, args, env, out_path, err_path);
    r.status = child.wait_for(timeout_s);
    if (r.status < 0) {
      child.kill_group();
      r.status = child.wait_for(10);
      r.timed_out = true;
    }
    r.seconds = now_s() - start;
    r.out = child.out();
    r.err = child.err();
  }
  std::filesystem::remove_all(dir);
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

// The keys docs/cli.md promises in summary.json.
inline const std::vector<std::string>& summary_keys() {
  static const std::vector<std::string> k = {"model",  "policy",        "backend",    "world",
                                             "steps",  "params",        "samples_per_s", "final_loss",
                                             "test_accuracy", "comm_bytes", "exposed_comm_fraction"};
  return k;
}

}  // namespace dd::cli::test
