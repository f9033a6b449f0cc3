// CommQueue / QueuedWork: the FIFO communication thread shared by the CPU backends.
#include "backends/common/comm_queue.h"

#include "base/clock.h"

#include "base/error.h"
#include "base/fp_mode.h"

namespace dd {

void QueuedWork::wait() {
  std::unique_lock<std::mutex> lk(m_);
  cv_.wait(lk, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool QueuedWork::test() {
  std::lock_guard<std::mutex> lk(m_);
  return done_;
}

void QueuedWork::finish(std::exception_ptr error) {
  end_time_.store(now_s());  // the timeline's end of this collective, as the communication thread saw it
  {
    std::lock_guard<std::mutex> lk(m_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

CommQueue::CommQueue(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

WorkPtr CommQueue::submit(Op op) {
  auto work = std::make_shared<QueuedWork>();
  {
    std::lock_guard<std::mutex> lk(m_);
    if (stop_) {
      work->finish(std::make_exception_ptr(PeerLost(name_ + ": backend is shutting down; operation not run")));
      return work;
    }
    items_.push_back({std::move(op), work});
  }
  cv_.notify_one();
  return work;
}

void CommQueue::loop() {
  apply_subnormals_here();  // reductions (Gloo's and MPI's sums) run on this thread
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stop_ || !items_.empty(); });
      if (stop_) {
        // Ops never started cannot complete on any rank now; fail them rather than leave waiters hanging.
        for (auto& it : items_)
          it.work->finish(
              std::make_exception_ptr(PeerLost(name_ + ": backend destroyed before the operation ran")));
        items_.clear();
        return;
      }
      item = std::move(items_.front());
      items_.pop_front();
    }
    std::exception_ptr err;
    try {
      item.op();
    } catch (...) {
      err = std::current_exception();
    }
    item.work->finish(err);
  }
}

}  // namespace dd
