// Shared pieces of the fault tests: a temporary directory, the train command of a rank, /proc look-ups, and the
// check that a survivor's stderr is one clean error line naming the lost rank.
#pragma once
#include <dirent.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/child_process.h"

#ifndef DREAMDDP_BIN
#error "DREAMDDP_BIN must name the dreamddp binary under test"
#endif

#include "tests/common/tmp_dir.h"

namespace dd::faults {

inline const std::string kBin = DREAMDDP_BIN;
constexpr double kTimeoutS = 5;             // --timeout of every rank
constexpr double kBoundS = kTimeoutS + 10;  // survivors must be gone within this after the fault

using testing_common::ChildProcess;
using testing_common::mono_s;
using testing_common::slurp;
using testing_common::TmpDir;

// A long training run: it only ends through the fault the test injects.
inline std::vector<std::string> train_args() {
  return {"train", "--model", "mlp", "--data", "synthetic", "--steps", "100000", "--threads", "1", "--timeout",
          std::to_string(int(kTimeoutS)), "--log-every", "1"};
}

// Rank 0 prints "step N/100000 ..." after each step (--log-every 1) once the ranks are training together.
inline const char* kTrainingLine = "step 3/100000";

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::string cur;
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      if (!cur.empty()) v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) v.push_back(cur);
  return v;
}

// A survivor's stderr: exactly one error line, naming `lost` as the lost rank; no crash, abort or trace.
inline void expect_clean_peer_lost(const std::string& err, int lost, const std::string& who) {
  for (const char* bad : {"terminate called", "Aborted", "Segmentation fault", "core dumped", "stack trace",
                          "Backtrace", "what():"})
    EXPECT_EQ(err.find(bad), std::string::npos) << who << " stderr has '" << bad << "':\n" << err;
  std::vector<std::string> errors;
  for (auto& l : lines(err))
    if (l.find("error") != std::string::npos) errors.push_back(l);
  ASSERT_EQ(errors.size(), 1u) << who << " should print exactly one error line:\n" << err;
  const std::string& e = errors[0];
  EXPECT_EQ(e.rfind("dreamddp train: error: ", 0), 0u) << who << ": " << e;
  // Gloo's post-mortem names the ranks that did not report: "... lost rank 1 [timeout ...]".
  const auto at = e.find("lost ");
  ASSERT_NE(at, std::string::npos) << who << " does not name the lost rank: " << e;
  const auto end = e.find(" [", at);
  EXPECT_EQ(e.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5),
            "rank " + std::to_string(lost))
      << who << ": " << e;
}

inline int parent_of(pid_t pid) {
  std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto rp = st.rfind(')');
  if (rp == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(st.c_str() + rp + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// Gone or a zombie (reparented children are reaped by whoever adopts them, possibly later).
inline bool process_gone(pid_t pid) {
  std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (st.empty()) return true;
  auto rp = st.rfind(')');
  return rp != std::string::npos && rp + 2 < st.size() && st[rp + 2] == 'Z';
}

inline bool has_env(pid_t pid, const std::string& entry) {
  std::string env = slurp("/proc/" + std::to_string(pid) + "/environ");
  size_t pos = 0;
  while (pos < env.size()) {
    size_t z = env.find('\0', pos);
    if (env.compare(pos, (z == std::string::npos ? env.size() : z) - pos, entry) == 0) return true;
    if (z == std::string::npos) break;
    pos = z + 1;
  }
  return false;
}

inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    if (parent_of(pid_t(pid)) == parent) out.push_back(pid_t(pid));
  }
  closedir(d);
  return out;
}

}  // namespace dd::faults
