// A temporary directory for one test, removed at the end (kept when DD_KEEP_TEST_DIRS is set, for debugging).
// Shared by the test harnesses that run the dreamddp binary (tests/cli, tests/faults).
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace dd::testing_common {

struct TmpDir {
  std::string path;
  explicit TmpDir(const std::string& prefix = "dd-test") {
    std::string t = "/tmp/" + prefix + "-XXXXXX";
    if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path = t;
  }
  ~TmpDir() {
    if (std::getenv("DD_KEEP_TEST_DIRS")) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

}  // namespace dd::testing_common
