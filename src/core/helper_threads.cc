#include "graphdump/internal/helper_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace graphdump {
namespace {

constexpr int kMaxThreads = 4;

int CoresAvailable() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

class HelperPool {
 public:
  explicit HelperPool(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { Loop(); });
  }
  int threads() const { return static_cast<int>(threads_.size()) + 1; }

  void Run(size_t count, const std::function<void(size_t)>& task) {
    std::unique_lock<std::mutex> run(run_mu_, std::try_to_lock);
    if (!run.owns_lock() || threads_.empty() || count < 2) {
      for (size_t i = 0; i < count; ++i) task(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = &task;
      count_ = count;
      next_.store(0);
      ++generation_;
    }
    wake_.notify_all();
    Work(task, count);
    std::unique_lock<std::mutex> lock(mu_);
    // A helper that has not joined yet finds no task once this returns; one that has joined
    // is counted in busy_ and finishes before the task goes out of scope.
    idle_.wait(lock, [this] { return busy_ == 0; });
    task_ = nullptr;
  }

 private:
  void Work(const std::function<void(size_t)>& task, size_t count) {
    for (size_t i = next_.fetch_add(1); i < count; i = next_.fetch_add(1)) task(i);
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seen = generation_;
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (task_ == nullptr) continue;
      const std::function<void(size_t)>* task = task_;
      const size_t count = count_;
      ++busy_;
      lock.unlock();
      Work(*task, count);
      lock.lock();
      if (--busy_ == 0) idle_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mu_;  // one loop at a time uses the helpers
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  uint64_t generation_ = 0;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  int busy_ = 0;
};

HelperPool& Pool() {
  // Never destroyed: helpers may still be waiting when static destructors run at exit.
  static HelperPool* pool = new HelperPool(std::min(CoresAvailable(), kMaxThreads) - 1);
  return *pool;
}

}  // namespace

void RunOnHelpers(size_t count, const std::function<void(size_t)>& task) {
  Pool().Run(count, task);
}

int HelperThreadCount() { return Pool().threads(); }

}  // namespace graphdump
