#include "replay_suspects.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "commands.h"

namespace graphdump::tools {
namespace {

struct Captured {
  int exit_code = -1;     // -1: did not exit normally (or could not start)
  int signal_number = 0;  // the signal that ended it, 0 when none
  std::string out, err;
};

// Runs `argv` (argv[0] an absolute path) with stdin from /dev/null, capturing stdout and
// stderr. Both pipes are drained together, so neither child stream can fill and block it.
Captured RunCaptured(const std::vector<std::string>& argv) {
  Captured c;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    c.err = fmt::format("pipe: {}", std::strerror(errno));
    return c;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    c.err = fmt::format("pipe: {}", std::strerror(errno));
    close(out_pipe[0]);
    close(out_pipe[1]);
    return c;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    c.err = fmt::format("fork: {}", std::strerror(errno));
    close(out_pipe[0]);
    close(err_pipe[0]);
    return c;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&c.out, &c.err};
  int open_count = 2;
  char buffer[1 << 16];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) c.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) c.signal_number = WTERMSIG(status);
  return c;
}

// The last line of `text` that is not empty (a child's error message), trimmed.
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end + 1 - (start == std::string::npos ? 0 : start + 1));
}

nlohmann::json NotReplayed(const std::string& reason) {
  return {{"replayable", false}, {"verdict", "not replayable"}, {"reason", reason}};
}

}  // namespace

std::vector<SuspectReplay> ReplaySuspects(const analysis::CompareResult& result,
                                          const std::string& a, const std::string& b, int n,
                                          const char* command) {
  std::vector<SuspectReplay> replays;
  // N distinct kernels: a kernel that adds error in several iterations or calls is replayed
  // once, at its largest contribution (the list is ranked).
  std::vector<int64_t> chosen;
  std::set<std::pair<uint32_t, std::string>> seen;  // (rank, kernel)
  for (int64_t index : result.contributors) {
    if (chosen.size() >= static_cast<size_t>(std::max(n, 0))) break;
    const analysis::KernelComparison& k = result.kernels[index];
    if (seen.insert({k.rank, k.name_a}).second) chosen.push_back(index);
  }
  const size_t count = chosen.size();
  if (count == 0) return replays;
  const std::optional<std::string> torch = TorchExecutable(command);
  if (!torch) return replays;
  for (size_t i = 0; i < count; ++i) {
    const int64_t index = chosen[i];
    const analysis::KernelComparison& k = result.kernels[index];
    std::fprintf(stderr, "graphdump %s: replaying %zu/%zu: %s\n", command, i + 1, count,
                 k.name_a.c_str());
    const Captured run =
        RunCaptured({*torch, "replay", a, k.name_a, "--reference", b, "--iteration",
                     std::to_string(k.iteration), "--call", std::to_string(k.call), "--rank",
                     std::to_string(k.rank), "--json"});
    SuspectReplay replay{index, {}};
    nlohmann::json parsed = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("verdict")) {
      replay.result = std::move(parsed);
    } else {
      std::string why = LastLine(run.err);
      if (why.empty()) {
        why = run.signal_number != 0
                  ? fmt::format("graphdump replay was killed by signal {} ({})", run.signal_number,
                                strsignal(run.signal_number))
                  : fmt::format("graphdump replay exited with {}", run.exit_code);
      }
      replay.result = NotReplayed(why);
    }
    replays.push_back(std::move(replay));
  }
  return replays;
}

std::string SuspectReplay::Verdict() const {
  return result.value("verdict", std::string("not replayable"));
}

std::string SuspectReplay::Words() const {
  const std::string reason = result.value("reason", std::string());
  const std::string verdict = Verdict();
  if (reason.rfind(verdict, 0) == 0) return reason.substr(verdict.size());
  return reason.empty() ? "" : ": " + reason;
}

std::string SuspectReplayText(const SuspectReplay& replay) {
  return replay.Verdict() + replay.Words();
}

}  // namespace graphdump::tools
