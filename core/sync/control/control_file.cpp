// ControlFile: polling, trimming and validating the spec written to --control-file.
#include "core/sync/control/control_file.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "base/error.h"
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
  last_step_ = step;
  try {
    const PolicySpec parsed = PolicySpec::parse(spec);
    make_policy(parsed);
    if (check_)
      if (const std::string why = check_(parsed); !why.empty()) throw UsageError(why);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync: ignoring control file %s: %s\n", path_.c_str(), e.what());
    return false;
  }
  pending_ = spec;
  return true;
}

void ControlFile::save(ByteWriter& w) const {
  w.put_str(last_);
  w.put<int64_t>(last_step_);
  w.put_str(pending_);
}

void ControlFile::load(ByteReader& r) {
  last_ = r.get_str();
  last_step_ = r.get<int64_t>();
  pending_ = r.get_str();
}

void check_control_file_path(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError(option + ": needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(option + " " + path + ": is a directory, not a file");
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;  // the working directory
  if (!fs::exists(parent, ec)) throw UsageError(option + " " + path + ": directory " + parent.string() + " does not exist");
  if (!fs::is_directory(parent, ec)) throw UsageError(option + " " + path + ": " + parent.string() + " is not a directory");
}

}  // namespace dd::sync
