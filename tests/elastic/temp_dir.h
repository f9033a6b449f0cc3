// A temporary directory for the elastic unit tests' file key stores, removed with everything in it.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace dd::train {

struct TempDir {
  TempDir() {
    char t[] = "/tmp/dd_elastic_unit.XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

}  // namespace dd::train
