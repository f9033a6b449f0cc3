// The crash-safe half of MetricsWriter: publishing a complete file image by atomic rename, and the background
// thread that does it periodically.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dd::telemetry {

// Writes all bytes to PATH.tmp and renames it over PATH: readers see the old or the new file, never a mix, and
// a process killed at any instant leaves one of them. Throws dd::UsageError when PATH.tmp cannot be created
// (unwritable directory), std::runtime_error when writing or renaming fails.
void publish_atomically(const std::string& path, const std::vector<char>& bytes);

// Calls `flush` every interval until stop(). The interval is max(interval_s, last_flush_s() / 0.02): a flush
// may take at most 2% of wall time, so large files are published less often. The first exception a flush
// throws stops the thread; it is reported on stderr ("metrics: background flush of <what> failed ...") and
// kept for error().
class FlushThread {
 public:
  FlushThread(double interval_s, std::function<void()> flush, std::function<double()> last_flush_s,
              std::string what);
  ~FlushThread();  // stop()
  FlushThread(const FlushThread&) = delete;
  FlushThread& operator=(const FlushThread&) = delete;

  void stop();  // wakes and joins the thread; idempotent
  std::exception_ptr error() const;

 private:
  void main();

  const double interval_s_;
  const std::function<void()> flush_;
  const std::function<double()> last_flush_s_;
  const std::string what_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace dd::telemetry
