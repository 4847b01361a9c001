// Signal cleanup: on SIGINT, SIGTERM or SIGHUP the temporaries being written are removed and
// the appends in progress cut back (internal/signal_cleanup.h), then the process dies of the
// signal as it would have (docs/file-format.md, "Layout and sampling").
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <mutex>

#include "graphdump/file_system.h"
#include "graphdump/internal/signal_cleanup.h"

namespace graphdump {
namespace internal {

// Constant-initialised (no constructor runs, nothing to destroy), so the handler may use it at
// any time.
constinit SignalCleanup signal_cleanup;

namespace {
std::atomic<pid_t> remembered_pid{0};  // 0: not yet known in this process
}  // namespace

pid_t ProcessId() {
  pid_t pid = remembered_pid.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, [] { remembered_pid.store(0, std::memory_order_relaxed); });
  });
  pid = ::getpid();
  remembered_pid.store(pid, std::memory_order_relaxed);
  return pid;
}

}  // namespace internal

namespace {

using internal::signal_cleanup;

void UndoAndDie(int signal) {
  signal_cleanup.UndoAll();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

}  // namespace

void RemoveTemporariesOnSignals() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    if (::sigaction(signal, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction action = {};
    action.sa_handler = UndoAndDie;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
  }
}

}  // namespace graphdump
