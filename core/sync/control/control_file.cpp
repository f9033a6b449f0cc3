// ControlFile: polling, trimming and validating the spec written to --control-file.
#include "core/sync/control/control_file.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "core/sync/policy/registry.h"

namespace dd::sync {

bool ControlFile::poll(int64_t step) {
  if (step % 10 != 0) return false;
  std::ifstream f(path_);
  if (!f) return false;
  std::string spec((std::istreambuf_iterator<char>(f)), {});
  while (!spec.empty() && std::isspace(uint8_t(spec.back()))) spec.pop_back();
  while (!spec.empty() && std::isspace(uint8_t(spec.front()))) spec.erase(spec.begin());
  if (spec.empty() || spec == last_) return false;
  last_ = spec;
  try {
    make_policy(PolicySpec::parse(spec));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync: ignoring control file %s: %s\n", path_.c_str(), e.what());
    return false;
  }
  pending_ = spec;
  return true;
}

}  // namespace dd::sync
