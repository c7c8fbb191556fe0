#include "loom/sync/background_queue.h"

namespace loom::sync {

BackgroundQueue::BackgroundQueue() : thread_([this] { loop(); }) {}

BackgroundQueue::~BackgroundQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  thread_.join();
}

void BackgroundQueue::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_work_.notify_one();
}

void BackgroundQueue::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_idle_.wait(lock, [this] { return tasks_.empty() && !busy_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void BackgroundQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_work_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_ with nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    const bool skip = error_ != nullptr;  // after a failure the step is lost: skip the rest
    lock.unlock();
    try {
      if (!skip) task();
    } catch (...) {
      std::lock_guard<std::mutex> relock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (tasks_.empty()) cv_idle_.notify_all();
  }
}

}  // namespace loom::sync
