// Atomic publication of metrics.h5 snapshots (write PATH.tmp, rename over PATH) and the periodic flush thread.
#include "core/telemetry/snapshot_publisher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/error.h"

namespace dd::telemetry {
namespace {

// A flush may take at most this fraction of wall time; larger files get a longer interval.
constexpr double kMaxFlushDutyCycle = 0.02;

}  // namespace

void publish_atomically(const std::string& path, const std::vector<char>& bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw dd::UsageError("cannot write metrics file " + tmp + ": " + std::strerror(errno) +
                         " (is the output directory writable?)");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("writing " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) throw std::runtime_error("closing " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("renaming " + tmp + " to " + path + ": " + std::strerror(errno));
}

FlushThread::FlushThread(double interval_s, std::function<void()> flush, std::function<double()> last_flush_s,
                         std::string what)
    : interval_s_(interval_s),
      flush_(std::move(flush)),
      last_flush_s_(std::move(last_flush_s)),
      what_(std::move(what)),
      thread_([this] { main(); }) {}

FlushThread::~FlushThread() { stop(); }

void FlushThread::stop() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::exception_ptr FlushThread::error() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return error_;
}

void FlushThread::main() {
  std::unique_lock<std::mutex> lk(mutex_);
  while (!stop_) {
    double interval = std::max(interval_s_, last_flush_s_() / kMaxFlushDutyCycle);
    cv_.wait_for(lk, std::chrono::duration<double>(interval), [this] { return stop_; });
    if (stop_) break;
    lk.unlock();
    try {
      flush_();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "metrics: background flush of %s failed, telemetry stopped: %s\n", what_.c_str(),
                   e.what());
      lk.lock();
      error_ = std::current_exception();
      break;
    }
    lk.lock();
  }
}

}  // namespace dd::telemetry
