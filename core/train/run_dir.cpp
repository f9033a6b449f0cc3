// prepare_run_dir / write_file_atomic.
#include "core/train/run_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/common/error.h"

namespace fs = std::filesystem;

namespace dd::train {

void prepare_run_dir(const std::string& dir, bool overwrite, bool check_empty) {
  std::error_code ec;
  fs::path p(dir);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw UsageError("--out " + dir + ": exists and is not a directory");
    if (check_empty && !overwrite && !fs::is_empty(p, ec))
      throw UsageError("--out " + dir + ": directory is not empty (an earlier run?); use another directory or --overwrite");
  } else {
    fs::create_directories(p, ec);
    if (ec) throw UsageError("--out " + dir + ": cannot create directory: " + ec.message());
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) throw UsageError("--out " + dir + ": directory is not writable");
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
