// Distributed analysis: launching the job, the allgather helper and the assignment of ranks to
// processes (analysis_distributed.h; the rendezvous is analysis_distributed_rendezvous.cc).
#include "analysis_distributed.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "commands.h"
#include "graphdump/launcher.h"
#include "graphdump/rank_environment.h"

extern char** environ;

namespace graphdump::tools {
namespace {

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool InDistributedJob() {
  for (const char* name : {kRankEnv, kWorldSizeEnv, kMasterAddrEnv, kMasterPortEnv}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

int LaunchAnalysisJob(const std::string& command, int nproc, int argc, char** argv) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = {"/proc/self/exe", command};
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& a : ArgsWithoutOption(args, "--nproc")) options.argv.push_back(std::move(a));
  // Rank 0 speaks for the job: its lines are this command's output, as one process would write.
  options.output = [](const std::string& line, bool is_stderr) {
    static const std::string kRank0 = "[rank 0] ";
    const std::string& text = line.rfind(kRank0, 0) == 0 ? line.substr(kRank0.size()) : line;
    std::FILE* stream = is_stderr ? stderr : stdout;
    std::fwrite(text.data(), 1, text.size(), stream);
    std::fflush(stream);
  };
  auto result = LaunchRanks(options);
  if (!result.ok()) {
    fmt::print(stderr, "graphdump {}: error: {}\n", command, result.status().message());
    return kExitUsage;
  }
  const RankExit& first = result->ranks[0];
  if (result->stop_signal == 0 && first.signal == 0 && !first.stopped_by_launcher &&
      (result->ok() || result->first_failed_rank == 0)) {
    return first.exit_status;  // the answer's status (1: a finding), not a failure
  }
  fmt::print(stderr, "graphdump {}: {}\n", command, result->message);
  const RankExit& failed = result->ranks[std::max(result->first_failed_rank, 0)];
  return failed.signal != 0 ? kExitFailure : failed.exit_status;
}

std::unique_ptr<AnalysisJob> AnalysisJob::Join(const std::string& command, int* exit_code) {
  auto env = RankEnvironmentFromEnv();
  if (!env.ok()) {
    fmt::print(stderr, "graphdump {}: error: {}\n", command, env.status().message());
    *exit_code = kExitUsage;
    return nullptr;
  }
  const std::optional<std::string> helper = TorchExecutable(command.c_str());
  *exit_code = kExitUsage;
  if (!helper) return nullptr;
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    fmt::print(stderr, "graphdump {}: error: cannot create pipes: {}\n", command,
               std::strerror(errno));
    *exit_code = kExitFailure;
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::string program = *helper, verb = "allgather";
  char* args[] = {program.data(), verb.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (spawned != 0) {
    fmt::print(stderr, "graphdump {}: error: cannot start {}: {}\n", command, program,
               std::strerror(spawned));
    close(in[1]);
    close(out[0]);
    *exit_code = kExitFailure;
    return nullptr;
  }
  signal(SIGPIPE, SIG_IGN);  // a helper that died is an error of the next call, not a signal
  std::unique_ptr<AnalysisJob> job(new AnalysisJob);
  job->command_ = command;
  job->rank_ = env->rank;
  job->world_size_ = env->world_size;
  job->helper_ = pid;
  job->to_helper_ = in[1];
  job->from_helper_ = out[0];
  *exit_code = kExitOk;
  return job;
}

AnalysisJob::~AnalysisJob() {
  if (to_helper_ >= 0) close(to_helper_);  // end of stdin: the helper leaves the job
  if (from_helper_ >= 0) close(from_helper_);
  if (helper_ > 0) {
    int status = 0;
    while (waitpid(helper_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

StatusOr<std::vector<std::string>> AnalysisJob::AllGather(const std::string& mine) {
  uint8_t header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<uint8_t>(uint64_t{mine.size()} >> (8 * i));
  const Status lost = Status::IOError(
      "the graphdump-torch allgather helper of process " + std::to_string(rank_) +
      " ended (its message is above): the job's processes could not exchange their results");
  if (!WriteAll(to_helper_, header, 8) || !WriteAll(to_helper_, mine.data(), mine.size())) {
    return lost;
  }
  std::vector<std::string> all(world_size_);
  for (std::string& bytes : all) {
    if (!ReadAll(from_helper_, header, 8)) return lost;
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= uint64_t{header[i]} << (8 * i);
    bytes.resize(size);
    if (size > 0 && !ReadAll(from_helper_, bytes.data(), size)) return lost;
  }
  return all;
}

std::map<uint32_t, uint32_t> AssignRanks(const std::map<uint32_t, std::vector<uint32_t>>& seen,
                                         const std::vector<uint32_t>& need_with,
                                         std::optional<uint32_t> with) {
  std::map<uint32_t, uint32_t> owner;
  size_t i = 0;
  for (const auto& [rank, processes] : seen) {
    std::vector<uint32_t> candidates = processes;
    if (with && rank != *with &&
        std::find(need_with.begin(), need_with.end(), rank) != need_with.end()) {
      const auto other = seen.find(*with);
      std::erase_if(candidates, [&](uint32_t p) {
        return other == seen.end() ||
               std::find(other->second.begin(), other->second.end(), p) == other->second.end();
      });
    }
    if (!candidates.empty()) owner[rank] = candidates[i % candidates.size()];
    ++i;
  }
  return owner;
}

std::vector<uint32_t> ByDirectoryName(std::vector<uint32_t> ranks) {
  std::sort(ranks.begin(), ranks.end(), [](uint32_t a, uint32_t b) {
    return std::to_string(a) < std::to_string(b);
  });
  return ranks;
}

}  // namespace graphdump::tools
