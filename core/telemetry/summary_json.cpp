// Atomic summary.json writer: a crash mid-write leaves the previous summary (or none), never a truncated one.
#include "core/telemetry/summary_json.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/error.h"

namespace dd::telemetry {

void write_summary_json(const std::string& path, const nlohmann::json& j) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw dd::UsageError("cannot write " + tmp + ": " + std::strerror(errno) + " (is the output directory writable?)");
    f << j.dump(2) << '\n';
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw std::runtime_error("writing " + tmp + " failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("renaming " + tmp + " to " + path + ": " + std::strerror(e));
  }
}

}  // namespace dd::telemetry
