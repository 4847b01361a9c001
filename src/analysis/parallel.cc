#include "graphdump/analysis/parallel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace graphdump::analysis {
namespace {

// Draws a one-line bar on stderr, at most every 100 ms.
class ProgressBar {
 public:
  ProgressBar(const std::string& label, size_t total)
      : label_(label), total_(total), enabled_(!label.empty() && ::isatty(2)) {}
  ~ProgressBar() {
    if (enabled_ && drawn_) std::fprintf(stderr, "\r%*s\r", 79, "");
  }
  void Update(size_t done) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 40;
    const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r%s [%s] %zu/%zu", label_.c_str(), bar.c_str(), done, total_);
    std::fflush(stderr);
  }

 private:
  std::string label_;
  size_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ParallelFor(size_t count, int threads, const std::string& progress_label,
                 const std::function<void(size_t)>& task) {
  if (count == 0) return;
  ProgressBar bar(progress_label, count);
  std::atomic<size_t> next{0}, done{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      task(i);
      bar.Update(done.fetch_add(1) + 1);
    }
  };
  const size_t n = std::min<size_t>(count, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

}  // namespace graphdump::analysis
