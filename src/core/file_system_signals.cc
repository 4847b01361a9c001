// Signal cleanup: on SIGINT, SIGTERM or SIGHUP the temporaries being written are removed and
// the appends in progress cut back (internal/signal_cleanup.h), then the process dies of the
// signal as it would have (docs/file-format.md, "Layout and sampling").
#include <signal.h>

#include "graphdump/file_system.h"
#include "graphdump/internal/signal_cleanup.h"

namespace graphdump {
namespace internal {

// Constant-initialised (no constructor runs, nothing to destroy), so the handler may use it at
// any time.
constinit SignalCleanup signal_cleanup;

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
