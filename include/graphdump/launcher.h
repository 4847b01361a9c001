// A local launcher for multi-rank jobs (`graphdump train ... --nproc N`): starts N copies of a
// program on this machine as the ranks of one job, the way torchrun does, and supervises them.
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1) and
// MASTER_PORT (a free port) in its environment (rank_environment.h reads them). Every line a
// rank writes to stdout or stderr is forwarded to the same stream of the launcher, prefixed with
// "[rank k] ". When a rank fails (a non-zero exit status or a signal), the launcher stops the
// others (SIGTERM, then SIGKILL after a grace period) and reports which rank failed and how.
// Ranks die with the launcher (PR_SET_PDEATHSIG), so a killed launcher leaves no orphans.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graphdump/status.h"

namespace graphdump {

struct LaunchOptions {
  int nproc = 1;                  // number of ranks, >= 1
  std::vector<std::string> argv;  // program (searched in PATH when it has no '/') and arguments
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;  // 0: pick a free port
  // After the first failure, how long the other ranks get between SIGTERM and SIGKILL.
  std::chrono::milliseconds grace{5000};
  // Where forwarded lines go (each already prefixed and ending in '\n'); null: the launcher's
  // own stdout and stderr.
  std::function<void(const std::string& line, bool is_stderr)> output;
  // Extra environment variables for every rank ("NAME=value").
  std::vector<std::string> extra_env;
};

// How one rank ended.
struct RankExit {
  uint32_t rank = 0;
  int exit_status = 0;               // when it exited
  int signal = 0;                    // when a signal ended it (0 otherwise)
  bool stopped_by_launcher = false;  // the launcher signalled it after another rank failed

  bool ok() const { return signal == 0 && exit_status == 0; }
  // "exited with status 3", "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

struct LaunchResult {
  std::vector<RankExit> ranks;  // indexed by rank
  int first_failed_rank = -1;   // the rank whose failure stopped the job; -1 when all succeeded
  std::string message;          // one line for people: "rank 1 killed by signal 9 (SIGKILL)..."
  // SIGINT, SIGTERM or SIGHUP when the launcher received it while the ranks ran: it was
  // forwarded to every rank (SIGKILL after the grace period), and they were waited for.
  int stop_signal = 0;

  bool ok() const { return first_failed_rank < 0; }
};

// Starts the ranks and waits for all of them. Returns an error only when the job could not be
// started (nproc < 1, empty argv, no free port, fork failed); a rank's failure is reported in
// the result. Ranks that could not exec the program fail with status 127. While the ranks run,
// SIGINT, SIGTERM and SIGHUP (those not ignored) do not end the calling process: they are
// forwarded to the ranks and reported in LaunchResult::stop_signal; the caller's actions for
// them are restored on return.
StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options);

// The CLI form: runs `argv` as `nproc` ranks, prints the failure message to stderr, and returns
// the process exit code: 0 when every rank succeeded, else the failed rank's exit status (3 for
// a rank killed by a signal, 2 when the job could not be started). Stopped by a signal, it
// raises that signal again once the ranks have ended.
int LaunchRanks(int nproc, const std::vector<std::string>& argv);

// `args` without the option `flag` and its value, written as "--nproc 2" or "--nproc=2" (every
// occurrence): what a launched rank runs, so that it does not launch again.
std::vector<std::string> ArgsWithoutOption(const std::vector<std::string>& args,
                                           const std::string& flag);

// A TCP port on `address` that was free a moment ago (bound to port 0, then released).
StatusOr<uint16_t> FindFreePort(const std::string& address = "127.0.0.1");

}  // namespace graphdump
