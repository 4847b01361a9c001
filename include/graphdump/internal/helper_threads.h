// A few threads that help the calling thread through a loop of independent tasks, kept for the
// life of the process (a reduction of a few megabytes cannot pay for starting threads). Used
// where the work is memory-bound: one core on these machines reads about half the bandwidth two
// cores do.
#pragma once

#include <cstddef>
#include <functional>

namespace graphdump {

// Runs task(0) ... task(count - 1), each once, on the calling thread and the shared helpers;
// returns when all have run. Tasks must not throw. When another thread is already using the
// helpers, or the process has only one core, the calling thread runs them all itself: callers
// never wait for each other, and results must not depend on which thread ran a task.
void RunOnHelpers(size_t count, const std::function<void(size_t)>& task);

// How many threads RunOnHelpers uses, the calling thread included: the cores this process may
// use, at most 4 (more do not read memory faster).
int HelperThreadCount();

}  // namespace graphdump
