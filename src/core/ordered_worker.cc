#include "graphdump/internal/ordered_worker.h"

#include <chrono>

#include "graphdump/status.h"

namespace graphdump {

OrderedWorker::OrderedWorker(size_t budget_bytes,
                             std::function<void(std::unique_ptr<Task>)> recycle)
    : budget_(budget_bytes), recycle_(std::move(recycle)), thread_([this] { Loop(); }) {
  GRAPHDUMP_CHECK(budget_bytes >= 1);
}

OrderedWorker::~OrderedWorker() {
  Wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  thread_.join();
  finished_.clear();
}

uint64_t OrderedWorker::Submit(std::unique_ptr<Task> task, size_t bytes) {
  std::vector<std::unique_ptr<Task>> finished;
  bool wake = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (in_flight_bytes_ > 0 && in_flight_bytes_ + bytes > budget_) {
      waiting_ = true;
      task_done_.wait(
          lock, [&] { return in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= budget_; });
      waiting_ = false;
    }
    finished.swap(finished_);
    has_finished_.store(false, std::memory_order_relaxed);
    in_flight_bytes_ += bytes;
    queue_.emplace_back(std::move(task), bytes);
    wake = sleeping_;
  }
  // The worker is woken only from its long sleep: otherwise it finds the task when it looks next.
  if (wake) work_ready_.notify_one();
  Dispose(finished);
  return ++submitted_;
}

void OrderedWorker::Dispose(std::vector<std::unique_ptr<Task>>& tasks) {
  if (!recycle_) return tasks.clear();
  for (std::unique_ptr<Task>& task : tasks) recycle_(std::move(task));
  tasks.clear();
}

void OrderedWorker::WaitFor(uint64_t number) {
  if (Done() < number) {
    work_ready_.notify_one();  // not worth its next look's delay: this thread waits for it
    std::unique_lock<std::mutex> lock(mu_);
    waiting_ = true;
    task_done_.wait(lock, [&] { return Done() >= number; });
    waiting_ = false;
  }
  Release();
}

void OrderedWorker::Release() {
  if (!has_finished_.load(std::memory_order_relaxed)) return;
  std::vector<std::unique_ptr<Task>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished.swap(finished_);
    has_finished_.store(false, std::memory_order_relaxed);
  }
  Dispose(finished);
}

void OrderedWorker::Loop() {
  for (;;) {
    std::unique_ptr<Task> task;
    size_t bytes = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto found = [&] { return stopping_ || !queue_.empty(); };
      for (int polls = 0; !found() && polls < kPollsBeforeSleep; ++polls) {
        work_ready_.wait_for(lock, std::chrono::microseconds(kPollMicros), found);
      }
      if (!found()) {
        sleeping_ = true;
        work_ready_.wait(lock, found);
        sleeping_ = false;
      }
      if (queue_.empty()) return;  // stopping and nothing left
      task = std::move(queue_.front().first);
      bytes = queue_.front().second;
      queue_.pop_front();
    }
    task->Run();
    bool notify = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_.push_back(std::move(task));
      has_finished_.store(true, std::memory_order_relaxed);
      in_flight_bytes_ -= bytes;
      done_.fetch_add(1, std::memory_order_release);
      notify = waiting_;
    }
    if (notify) task_done_.notify_all();
  }
}

}  // namespace graphdump
