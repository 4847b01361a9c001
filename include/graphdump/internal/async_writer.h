// A pool of writer threads fed through a queue bounded in bytes (docs/layout.md). Submit blocks
// while the bytes in flight would exceed the budget, so a slow disk slows the producer down instead
// of growing memory or dropping data. A single job larger than the budget is admitted alone.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace graphdump {

class AsyncWriter {
 public:
  // REQUIRES: threads >= 1, budget_bytes >= 1.
  AsyncWriter(int threads, size_t budget_bytes);
  // Drains every pending job, then joins the threads.
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Queues `job`, which holds `bytes` of memory until it has run. Blocks while the budget is full.
  void Submit(size_t bytes, std::function<void()> job);

  // Waits until every submitted job has run.
  void Drain();

  // The largest number of bytes that were in flight at once (for tests and the summary).
  size_t PeakBytes() const;

 private:
  struct Job {
    size_t bytes;
    std::function<void()> run;
  };
  void WorkerLoop();

  const size_t budget_;
  mutable std::mutex mu_;
  std::condition_variable work_ready_;   // a job was queued or the pool stops
  std::condition_variable space_ready_;  // bytes were released or a job finished
  std::deque<Job> queue_;
  size_t in_flight_bytes_ = 0;  // queued + running
  size_t unfinished_jobs_ = 0;  // queued + running
  size_t peak_bytes_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace graphdump
