// One thread that runs tasks in the order they were submitted: work a host's thread hands off
// and does not wait for (the statistics of a kernel's tensors, docs/python.md). Handing a task
// over costs the submitting thread no system call while work keeps coming: the worker looks for
// tasks every kPollMicros, and sleeps until woken only after kPollsBeforeSleep empty looks.
// Memory the queued tasks hold is bounded in bytes: Submit waits while the budget is spent. A
// finished task is destroyed (or recycled) on the thread that submits (at its next Submit, Wait
// or Release), never on the worker: what a task holds (a host's tensor handles) may need that
// thread to be released.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace graphdump {

class OrderedWorker {
 public:
  class Task {
   public:
    virtual ~Task() = default;
    virtual void Run() = 0;
  };

  // REQUIRES: budget_bytes >= 1. `recycle`, when given, takes each task that has run instead of
  // destroying it, on the submitting thread as its destruction would be (a host reuses the
  // task's buffers: no allocation per task).
  explicit OrderedWorker(size_t budget_bytes,
                         std::function<void(std::unique_ptr<Task>)> recycle = nullptr);
  // Runs what is queued, then joins the thread. Call it on the submitting thread.
  ~OrderedWorker();
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  // Queues `task`, which holds `bytes` of memory until it has run, and returns its number (1,
  // 2, ... in submission order). Waits while the budget is spent (a task larger than the budget
  // is admitted alone).
  uint64_t Submit(std::unique_ptr<Task> task, size_t bytes);
  // The number the next Submit returns.
  uint64_t Next() const { return submitted_ + 1; }
  // Returns once task `number` (and so every task before it) has run.
  void WaitFor(uint64_t number);
  // Returns once every task submitted so far has run.
  void Wait() { WaitFor(submitted_); }
  // The number of the last task that has run (0: none yet).
  uint64_t Done() const { return done_.load(std::memory_order_acquire); }
  // Destroys the tasks that have run (on the calling thread); cheap when there are none.
  void Release();

 private:
  void Loop();
  // Recycles or destroys `tasks` that have run (on the submitting thread).
  void Dispose(std::vector<std::unique_ptr<Task>>& tasks);

  static constexpr int kPollMicros = 100;
  static constexpr int kPollsBeforeSleep = 100;

  const size_t budget_;
  const std::function<void(std::unique_ptr<Task>)> recycle_;
  uint64_t submitted_ = 0;  // the submitting thread's
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::condition_variable work_ready_, task_done_;
  std::deque<std::pair<std::unique_ptr<Task>, size_t>> queue_;
  std::vector<std::unique_ptr<Task>> finished_;
  std::atomic<bool> has_finished_{false};  // finished_ is not empty
  size_t in_flight_bytes_ = 0;
  bool waiting_ = false;   // the submitting thread waits for task_done_
  bool sleeping_ = false;  // the worker waits for work_ready_ without a timeout
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace graphdump
