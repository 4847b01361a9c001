// Parallel work over files with a progress bar on a terminal.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace graphdump::analysis {

// A progress line on stderr while long work runs, on a terminal only (stderr a tty and `label`
// non-empty): "label [########                ] 37/512, 25.3/s", redrawn at most every 100 ms
// and erased when destroyed. Update is thread-safe.
class Progress {
 public:
  Progress(std::string label, size_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void Update(size_t done);
  // Adds `more` to the total and `done` to the count (work found as it goes: a rank's tensors
  // once the rank is indexed). Thread-safe.
  void Add(size_t more, size_t done);

 private:
  std::string label_;
  size_t total_;
  size_t done_ = 0;  // Add's count
  bool enabled_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_{};
};

// Tells malloc to keep what it frees for reuse rather than hand it back to the kernel: analysis
// builds and frees one rank's index after another, and with glibc's defaults every rank's pages
// are unmapped and faulted in again (about half of `watch`'s time). Process-wide; call once at
// start (the CLI's main does). No effect where mimalloc replaces malloc (the CLI, when built
// with it: tools/mimalloc_tuning.cc sets its own delay).
void ReuseFreedMemory();

// Default worker count: the hardware threads (at least 1).
int DefaultThreads();

// Calls `task(i)` for i in [0, count) on `threads` threads (each index once, any order), with a
// Progress line labelled `progress_label` (none when it is empty). `task` must be thread-safe
// across different i.
void ParallelFor(size_t count, int threads, const std::string& progress_label,
                 const std::function<void(size_t)>& task);

}  // namespace graphdump::analysis
