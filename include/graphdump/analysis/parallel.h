// Parallel work over files with a progress bar on a terminal.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace graphdump::analysis {

// Default worker count: the hardware threads (at least 1).
int DefaultThreads();

// Calls `task(i)` for i in [0, count) on `threads` threads (each index once, any order). When
// `progress_label` is non-empty and stderr is a terminal, draws "label [####   ] i/count" on
// stderr while running. `task` must be thread-safe across different i.
void ParallelFor(size_t count, int threads, const std::string& progress_label,
                 const std::function<void(size_t)>& task);

}  // namespace graphdump::analysis
