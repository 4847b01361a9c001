#include "graphdump/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "graphdump/rank_environment.h"

extern char** environ;

namespace graphdump {
namespace {

using Clock = std::chrono::steady_clock;

// One output stream (stdout or stderr) of one rank: the read end of its pipe and the partial
// line read so far.
struct Stream {
  int fd = -1;
  bool is_stderr = false;
  std::string pending;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  RankExit exit;
  Stream streams[2];
};

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The stop signal (SIGINT, SIGTERM, SIGHUP) received while the ranks run; 0 until then. A signal
// handler can only store to a variable like this one.
volatile sig_atomic_t received_stop_signal = 0;

void RecordStopSignal(int signal) { received_stop_signal = signal; }

// While it lives, the stop signals (those not ignored) are recorded instead of ending the
// launcher: it forwards them to its ranks and waits for them, so that each rank cleans up
// (removes its temporaries) before the launcher dies of the signal too. Without this, the
// launcher died at once and PR_SET_PDEATHSIG killed the ranks with SIGKILL, which leaves
// temporaries behind.
class StopSignals {
 public:
  StopSignals() {
    received_stop_signal = 0;
    for (int i = 0; i < 3; ++i) {
      struct sigaction action = {};
      action.sa_handler = RecordStopSignal;
      sigemptyset(&action.sa_mask);
      installed_[i] = ::sigaction(kSignals[i], nullptr, &old_[i]) == 0 &&
                      old_[i].sa_handler != SIG_IGN &&
                      ::sigaction(kSignals[i], &action, nullptr) == 0;
    }
  }
  ~StopSignals() {
    for (int i = 0; i < 3; ++i) {
      if (installed_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
    }
  }
  int received() const { return received_stop_signal; }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3];
  bool installed_[3] = {};
};

// The environment of rank `rank`: the launcher's own, with the rank variables replaced.
std::vector<std::string> RankEnv(const LaunchOptions& options, uint16_t port, int rank) {
  const std::pair<const char*, std::string> vars[] = {
      {kRankEnv, std::to_string(rank)},      {kWorldSizeEnv, std::to_string(options.nproc)},
      {kLocalRankEnv, std::to_string(rank)}, {kLocalWorldSizeEnv, std::to_string(options.nproc)},
      {kMasterAddrEnv, options.master_addr}, {kMasterPortEnv, std::to_string(port)},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : vars) {
      size_t n = std::strlen(name);
      if (entry.size() > n && entry.substr(0, n) == name && entry[n] == '=') replaced = true;
    }
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : vars) env.push_back(std::string(name) + "=" + value);
  for (const std::string& extra : options.extra_env) env.push_back(extra);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Forks and execs one rank with its stdout and stderr connected to new pipes.
Status StartRank(const LaunchOptions& options, uint16_t port, int index, Rank* rank) {
  std::vector<std::string> env_strings = RankEnv(options, port, index);
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> envp = CStrings(env_strings);
  std::vector<char*> argv = CStrings(argv_strings);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::IOError(Errno("pipe"));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::IOError(Errno("pipe"));
  }
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Status::IOError(Errno("fork"));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    static const char kMessage[] = "graphdump launcher: cannot execute the rank's program\n";
    ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    (void)ignored;
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  rank->pid = pid;
  rank->running = true;
  rank->exit.rank = static_cast<uint32_t>(index);
  rank->streams[0] = {out[0], false, {}};
  rank->streams[1] = {err[0], true, {}};
  return Status::Ok();
}

void Emit(const LaunchOptions& options, const std::string& line, bool is_stderr) {
  if (options.output) {
    options.output(line, is_stderr);
    return;
  }
  FILE* stream = is_stderr ? stderr : stdout;
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fflush(stream);
}

// Reads what is available on `stream` and forwards each complete line; on end of file the
// partial last line too, then closes the stream.
void Drain(const LaunchOptions& options, uint32_t rank, Stream* stream) {
  char buffer[4096];
  ssize_t n = read(stream->fd, buffer, sizeof(buffer));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  std::string prefix = "[rank " + std::to_string(rank) + "] ";
  if (n > 0) stream->pending.append(buffer, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = stream->pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    Emit(options, prefix + stream->pending.substr(start, nl - start + 1), stream->is_stderr);
  }
  stream->pending.erase(0, start);
  if (n <= 0) {
    if (!stream->pending.empty()) Emit(options, prefix + stream->pending + "\n", stream->is_stderr);
    stream->pending.clear();
    close(stream->fd);
    stream->fd = -1;
  }
}

// Waits up to `timeout` for output and forwards it. Returns false when no stream is open.
bool PumpOutput(const LaunchOptions& options, std::vector<Rank>& ranks, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;
  std::vector<uint32_t> owner_ranks;
  for (Rank& rank : ranks) {
    for (Stream& stream : rank.streams) {
      if (stream.fd < 0) continue;
      fds.push_back({stream.fd, POLLIN, 0});
      owners.push_back(&stream);
      owner_ranks.push_back(rank.exit.rank);
    }
  }
  if (fds.empty()) {
    if (timeout_ms > 0) usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return false;
  }
  int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready <= 0) return true;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) Drain(options, owner_ranks[i], owners[i]);
  }
  return true;
}

// Reaps the ranks that ended. Returns the indexes of those that ended now.
std::vector<int> Reap(std::vector<Rank>& ranks) {
  std::vector<int> ended;
  for (size_t i = 0; i < ranks.size(); ++i) {
    Rank& rank = ranks[i];
    if (!rank.running) continue;
    int status = 0;
    pid_t r = waitpid(rank.pid, &status, WNOHANG);
    if (r != rank.pid) continue;
    rank.running = false;
    if (WIFEXITED(status)) rank.exit.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) rank.exit.signal = WTERMSIG(status);
    ended.push_back(static_cast<int>(i));
  }
  return ended;
}

// Among ranks that failed in the same round, the cause is more likely one killed by a signal
// (its peers then fail with connection errors), else the lowest rank.
int PickCause(const std::vector<Rank>& ranks, const std::vector<int>& ended) {
  int cause = -1;
  for (int i : ended) {
    const RankExit& e = ranks[i].exit;
    if (e.ok()) continue;
    if (cause < 0 || (e.signal != 0 && ranks[cause].exit.signal == 0)) cause = i;
  }
  return cause;
}

void SignalRunning(std::vector<Rank>& ranks, int signal) {
  for (Rank& rank : ranks) {
    if (!rank.running) continue;
    rank.exit.stopped_by_launcher = true;
    kill(rank.pid, signal);
  }
}

std::string FailureMessage(const std::vector<Rank>& ranks, int cause) {
  std::string message = "rank " + std::to_string(cause) +
                        " failed: " + ranks[cause].exit.Describe() + " (world size " +
                        std::to_string(ranks.size()) + ")";
  std::string others;
  for (const Rank& rank : ranks) {
    if (static_cast<int>(rank.exit.rank) == cause || rank.exit.ok()) continue;
    others += (others.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank.exit.rank) +
              " " + rank.exit.Describe() +
              (rank.exit.stopped_by_launcher ? " (stopped by the launcher)" : "");
  }
  if (!others.empty()) message += "; then " + others;
  return message;
}

}  // namespace

std::string RankExit::Describe() const {
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (abbrev ? " (SIG" + std::string(abbrev) + ")" : std::string());
  }
  if (exit_status == 127) return "exited with status 127 (the program could not be executed)";
  return "exited with status " + std::to_string(exit_status);
}

std::vector<std::string> ArgsWithoutOption(const std::vector<std::string>& args,
                                           const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(flag + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

StatusOr<uint16_t> FindFreePort(const std::string& address) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return Status::InvalidArgument("'" + address + "' is not an IPv4 address");
  }
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Status status = Status::IOError(Errno(("cannot find a free port on " + address).c_str()));
    close(fd);
    return status;
  }
  close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options) {
  if (options.nproc < 1) {
    return Status::InvalidArgument("--nproc " + std::to_string(options.nproc) +
                                   ": the number of ranks must be at least 1");
  }
  if (options.argv.empty()) return Status::InvalidArgument("no program to launch");
  uint16_t port = options.master_port;
  if (port == 0) {
    GRAPHDUMP_ASSIGN_OR_RETURN(port, FindFreePort(options.master_addr));
  }
  std::vector<Rank> ranks(static_cast<size_t>(options.nproc));
  for (int i = 0; i < options.nproc; ++i) {
    Status started = StartRank(options, port, i, &ranks[i]);
    if (!started.ok()) {
      SignalRunning(ranks, SIGKILL);
      for (Rank& rank : ranks) {
        if (rank.pid > 0) waitpid(rank.pid, nullptr, 0);
      }
      return Status::IOError("cannot start rank " + std::to_string(i) + ": " + started.message());
    }
  }
  LaunchResult result;
  StopSignals stop_signals;
  Clock::time_point kill_at = Clock::time_point::max();
  auto running = [&ranks] {
    for (const Rank& r : ranks) {
      if (r.running) return true;
    }
    return false;
  };
  while (running()) {
    if (stop_signals.received() != 0 && result.stop_signal == 0) {
      result.stop_signal = stop_signals.received();
      SignalRunning(ranks, result.stop_signal);
      kill_at = std::min(kill_at, Clock::now() + options.grace);
    }
    PumpOutput(options, ranks, 50);
    std::vector<int> ended = Reap(ranks);
    if (result.first_failed_rank < 0) {
      int cause = PickCause(ranks, ended);
      if (cause >= 0) {
        result.first_failed_rank = cause;
        SignalRunning(ranks, SIGTERM);
        kill_at = Clock::now() + options.grace;
      }
    }
    if (Clock::now() >= kill_at) {
      SignalRunning(ranks, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  // Forward what is left in the pipes (a rank's last words before it died). A background
  // process of a rank may hold a pipe open forever, so this is bounded.
  Clock::time_point drain_until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < drain_until && PumpOutput(options, ranks, 50)) {
  }
  for (Rank& rank : ranks) {
    for (Stream& stream : rank.streams) {
      if (stream.fd >= 0) close(stream.fd);
    }
  }
  for (Rank& rank : ranks) result.ranks.push_back(rank.exit);
  if (result.first_failed_rank >= 0) {
    result.message = FailureMessage(ranks, result.first_failed_rank);
  }
  return result;
}

int LaunchRanks(int nproc, const std::vector<std::string>& argv) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = argv;
  StatusOr<LaunchResult> result = LaunchRanks(options);
  if (!result.ok()) {
    std::fprintf(stderr, "graphdump: %s\n", result.status().message().c_str());
    return 2;
  }
  if (result->stop_signal != 0) {  // the ranks have stopped; now die of the signal as asked
    std::fflush(stdout);
    std::fflush(stderr);
    ::raise(result->stop_signal);
  }
  if (result->ok()) return 0;
  std::fprintf(stderr, "graphdump: job failed: %s\n", result->message.c_str());
  const RankExit& cause = result->ranks[static_cast<size_t>(result->first_failed_rank)];
  return cause.signal != 0 ? 3 : cause.exit_status;
}

}  // namespace graphdump
