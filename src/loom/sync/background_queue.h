// One background thread that runs posted tasks in order: the communication thread of a worker,
// so a bucket's collective runs while backward goes on. An exception in a task is kept and
// rethrown by wait_idle() on the worker's own thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace loom::sync {

class BackgroundQueue {
 public:
  BackgroundQueue();
  ~BackgroundQueue();
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  void post(std::function<void()> task);
  // Blocks until every posted task ran; rethrows the first exception a task threw.
  void wait_idle();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_work_, cv_idle_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace loom::sync
