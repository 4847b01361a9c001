#include "graphdump/analysis/parallel.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace graphdump::analysis {

void ReuseFreedMemory() {
  // Blocks under 32 MiB come from the heap (not a mapping of their own), and up to 64 MiB free
  // at a heap's top stays mapped; setting these also stops glibc's own threshold from moving.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

Progress::Progress(std::string label, size_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(!label_.empty() && ::isatty(2)),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\r%*s\r", 79, "");
}

void Progress::Update(size_t done) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 24;
  const int filled = total_ ? static_cast<int>(kWidth * std::min(done, total_) / total_) : kWidth;
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  char rate_text[32];
  if (rate >= 1e6) {
    std::snprintf(rate_text, sizeof(rate_text), "%.1fM", rate / 1e6);
  } else if (rate >= 1e4) {
    std::snprintf(rate_text, sizeof(rate_text), "%.1fk", rate / 1e3);
  } else {
    std::snprintf(rate_text, sizeof(rate_text), "%.1f", rate);
  }
  std::fprintf(stderr, "\r%s [%s] %zu/%zu, %s/s ", label_.c_str(), bar.c_str(), done, total_,
               rate_text);
  std::fflush(stderr);
}

void Progress::Add(size_t more, size_t done) {
  size_t now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    total_ += more;
    now = done_ += done;
  }
  Update(now);
}

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ParallelFor(size_t count, int threads, const std::string& progress_label,
                 const std::function<void(size_t)>& task) {
  if (count == 0) return;
  Progress bar(progress_label, count);
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
