#include "graphdump/internal/async_writer.h"

#include <algorithm>

#include "graphdump/status.h"

namespace graphdump {

AsyncWriter::AsyncWriter(int threads, size_t budget_bytes) : budget_(budget_bytes) {
  GRAPHDUMP_CHECK(threads >= 1 && budget_bytes >= 1);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

AsyncWriter::~AsyncWriter() {
  Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void AsyncWriter::Submit(size_t bytes, std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mu_);
  space_ready_.wait(lock, [&] { return in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= budget_; });
  in_flight_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, in_flight_bytes_);
  ++unfinished_jobs_;
  queue_.push_back(Job{bytes, std::move(job)});
  lock.unlock();
  work_ready_.notify_one();
}

void AsyncWriter::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  space_ready_.wait(lock, [&] { return unfinished_jobs_ == 0; });
}

size_t AsyncWriter::PeakBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_bytes_;
}

void AsyncWriter::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.run();
    job.run = nullptr;  // release the job's memory before counting it free
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_bytes_ -= job.bytes;
      --unfinished_jobs_;
    }
    space_ready_.notify_all();
  }
}

}  // namespace graphdump
