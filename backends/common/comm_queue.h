// A communication thread that runs queued operations strictly in submission order (the Gloo/MPI CPU backends).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backends/backend.h"

namespace dd {

// Work completed by another thread: the completer calls finish(error or nullptr) once.
class QueuedWork : public Work {
 public:
  void wait() override;
  bool test() override;
  void finish(std::exception_ptr error);
  double end_time() const override { return end_time_.load(); }

 private:
  std::atomic<double> end_time_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// One thread, one FIFO. An op that throws marks its work failed; the op itself decides (through the
// `fail_fast` hook) whether later ops must fail without running, e.g. once the transport context is dead.
class CommQueue {
 public:
  using Op = std::function<void()>;
  explicit CommQueue(std::string name);
  ~CommQueue();  // finishes the running op, fails the queued ones, joins
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  WorkPtr submit(Op op);
  // Runs `op` on the queue and waits for it (ordered after everything submitted before).
  void run_sync(Op op) { submit(std::move(op))->wait(); }

 private:
  void loop();
  struct Item {
    Op op;
    std::shared_ptr<QueuedWork> work;
  };
  std::string name_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dd
