// Internal: what a signal undoes before the process dies of it (file_system_signals.cc),
// registered by the POSIX file layer around every temporary and append. Not part of the
// public API.
#pragma once

#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>

namespace graphdump::internal {

constexpr size_t kNameMax = 255;

// getpid(), remembered: a system call per temporary otherwise (a tensor dump creates hundreds a
// step). A fork's child (pthread_atfork) forgets its parent's and asks again.
pid_t ProcessId();

// What a signal must undo before the process dies of it: the temporaries being written (removed)
// and the appends in progress (truncated back to their old size), so that SIGINT, SIGTERM or
// SIGHUP leave only whole files and whole rows. A fixed table of slots, since a signal handler
// may neither lock nor allocate; an action that finds every slot taken is not tracked.
class SignalCleanup {
 public:
  // Registers the temporary `name` in the directory `dir_fd` before it is created, so that a
  // signal arriving while it exists removes it. Blocks for good when the process is already
  // dying of a signal (nothing new may appear then). Returns the slot for Forget, or -1.
  int BeginTemporary(int dir_fd, const std::string& name) {
    return Begin([&](Slot& slot) {
      slot.dir_fd = dir_fd;
      std::memcpy(slot.name, name.c_str(), std::min(name.size() + 1, sizeof(slot.name)));
      slot.name[sizeof(slot.name) - 1] = '\0';
      slot.append_fd = -1;
    });
  }

  // Registers an append to `fd`, a file `size` bytes long before it: a signal truncates it back.
  int BeginAppend(int fd, off_t size) {
    return Begin([&](Slot& slot) {
      slot.dir_fd = -1;
      slot.name[0] = '\0';
      slot.append_fd = fd;
      slot.append_size = size;
    });
  }

  // Ends what Begin* started (the temporary is gone or committed, the append done).
  void Forget(int slot) {
    if (slot >= 0) slots_[slot].state.store(kFree, std::memory_order_release);
  }

  // Ends the creation that Begin* announced (after open() returned).
  void EndCreate() { creating_.fetch_sub(1, std::memory_order_seq_cst); }

  // The signal handler's part; async-signal-safe. New temporaries are stopped first, then the
  // ones being created get a moment to appear, then everything live is undone.
  void UndoAll() {
    dying_.store(true, std::memory_order_seq_cst);
    struct timespec start, now;
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    while (creating_.load(std::memory_order_seq_cst) > 0) {
      ::clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec >= 2) break;  // a creator this handler interrupted
    }
    const pid_t self = ::getpid();
    for (Slot& slot : slots_) {
      // A forked child inherits the table: what its parent registered is the parent's.
      if (slot.state.load(std::memory_order_acquire) != kLive || slot.pid != self) continue;
      if (slot.append_fd >= 0) {
        (void)::ftruncate(slot.append_fd, slot.append_size);
      } else {
        ::unlinkat(slot.dir_fd, slot.name, 0);
      }
    }
  }

 private:
  struct Slot {
    std::atomic<int> state;
    pid_t pid;  // the process that registered it
    int dir_fd;
    char name[kNameMax + 1];
    int append_fd;
    off_t append_size;
  };
  static constexpr int kSlots = 256;  // writer threads times files open at once, with room
  enum { kFree, kClaimed, kLive };
  static_assert(std::atomic<int>::is_always_lock_free);

  // Counts a creation in progress (the caller calls EndCreate after its open()) and claims a
  // slot filled by `fill`. A creator that finds the process dying never returns: the signal's
  // default action is about to end the process, and the handler may have finished already.
  template <typename Fill>
  int Begin(Fill fill) {
    creating_.fetch_add(1, std::memory_order_seq_cst);
    if (dying_.load(std::memory_order_seq_cst)) {
      for (;;) ::pause();
    }
    for (int i = 0; i < kSlots; ++i) {
      int expected = kFree;
      if (!slots_[i].state.compare_exchange_strong(expected, kClaimed)) continue;
      slots_[i].pid = ProcessId();
      fill(slots_[i]);
      slots_[i].state.store(kLive, std::memory_order_release);
      return i;
    }
    return -1;
  }

  std::atomic<bool> dying_{false};
  std::atomic<int> creating_{0};
  Slot slots_[kSlots] = {};  // zero pages until a slot is used
};

// The one table, constant-initialised in file_system_signals.cc.
extern SignalCleanup signal_cleanup;

}  // namespace graphdump::internal
