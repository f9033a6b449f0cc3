// prepare_run_dir, the output checks made before a run, write_file_atomic.
#include "core/train/run_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace fs = std::filesystem;

namespace dd::train {

namespace {

constexpr const char* kProbePrefix = ".dd-write-probe.";

// True when a directory can be made in `dir` (and is removed again): permission bits do not tell for root, nor
// for read-only or pseudo file systems.
bool can_create_in(const fs::path& dir) {
  const fs::path probe = dir / (kProbePrefix + std::to_string(getpid()));
  std::error_code ec;
  if (!fs::create_directory(probe, ec) || ec) return false;
  fs::remove(probe, ec);
  return true;
}

// Whether `dir` holds anything but other ranks' transient write probes (can_create_in): the ranks of one run
// start together, and one may probe the directory another has just made while rank 0 checks that it is empty.
bool holds_a_run(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(kProbePrefix, 0) != 0) return true;
  return false;
}

}  // namespace

void prepare_run_dir(const std::string& dir, bool overwrite, bool check_empty) {
  std::error_code ec;
  fs::path p(dir);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw UsageError("--out " + dir + ": exists and is not a directory");
    if (check_empty && !overwrite && holds_a_run(p))
      throw UsageError("--out " + dir + ": directory is not empty (an earlier run?); use another directory or --overwrite");
  } else {
    fs::create_directories(p, ec);
    if (ec) throw UsageError("--out " + dir + ": cannot create directory: " + ec.message());
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) throw UsageError("--out " + dir + ": directory is not writable");
}

void check_output_file(const std::string& option, const std::string& path, const std::string& made_dir) {
  if (path.empty()) throw UsageError(option + ": empty path");
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) throw UsageError(option + " " + path + ": is a directory (a file name is needed)");
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!made_dir.empty() && !fs::exists(parent, ec) &&
      fs::absolute(parent, ec).lexically_normal() == fs::absolute(fs::path(made_dir), ec).lexically_normal())
    return;  // the run's own directory, made before anything is written (check_output_dir vouched for it)
  if (!fs::exists(parent, ec)) throw UsageError(option + " " + path + ": directory " + parent.string() + " does not exist");
  if (!fs::is_directory(parent, ec)) throw UsageError(option + " " + path + ": " + parent.string() + " is not a directory");
  if (access(parent.c_str(), W_OK | X_OK) != 0 || !can_create_in(parent))
    throw UsageError(option + " " + path + ": directory " + parent.string() + " is not writable");
  if (fs::exists(p, ec) && access(p.c_str(), W_OK) != 0)
    throw UsageError(option + " " + path + ": existing file is not writable");
}

void check_output_dir(const std::string& option, const std::string& dir) {
  if (dir.empty()) throw UsageError(option + ": empty path");
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (ec) throw UsageError(option + " " + dir + ": " + ec.message());
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    throw UsageError(option + " " + dir + ": " + p.string() + " exists and is not a directory");
  if (access(p.c_str(), W_OK | X_OK) != 0 || !can_create_in(p))
    throw UsageError(option + " " + dir + ": " + p.string() + " is not writable");
}

std::string save_params_path(const std::string& path, int rank) {
  std::string p = path;
  bool per_rank = false;
  for (size_t pos; (pos = p.find("%r")) != std::string::npos;) {
    p.replace(pos, 2, std::to_string(rank));
    per_rank = true;
  }
  return per_rank || rank == 0 ? p : std::string();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp);
    f << text;
    f.flush();
    if (!f) throw std::runtime_error("write failed: " + tmp);
  }
  fs::rename(tmp, path);
}

}  // namespace dd::train
