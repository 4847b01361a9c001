// graphdump bisect -- SCRIPT ARGS: the search of BisectSearch (src/torch/replay/bisect.cc) over runs of
// the user's own script (docs/precision.md, "Bisecting a script"). Each round is one
// `graphdump python --precision P --keep-fp32 ... -- SCRIPT ARGS` in a child process, which
// writes its output (output_{i}.npy: the floating tensors of the last call of the first module
// the script calls) and the kernels it ran (run.json) into a directory of its own
// ($GRAPHDUMP_PRECISION_OUT). The reference is the script's float32 run (--precision fp32).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bisect_printer.h"
#include "commands.h"
#include "torch_cli.h"

namespace graphdump::tools {
namespace {

struct ScriptRun {
  std::vector<KernelInfo> kernels;  // those that ran with floating values, first seen first
  std::vector<std::string> states;  // floating parameters and buffers
  std::vector<at::Tensor> outputs;
  // Not ok when the script failed after writing its kernels (an entry of a round that matched
  // nothing): the kernels tell whether the run called other kernels than the first round.
  Status failure = Status::Ok();
};

class ScriptRunner {
 public:
  ScriptRunner(const BisectFlags& flags, std::filesystem::path work)
      : flags_(flags), work_(std::move(work)) {}

  // One run of the script in `precision` keeping `keep`.
  StatusOr<ScriptRun> Run(const std::string& precision, const std::vector<std::string>& keep);

 private:
  const BisectFlags& flags_;
  std::filesystem::path work_;
  int runs_ = 0;
};

// The last `lines` lines of a file.
std::string Tail(const std::filesystem::path& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string text;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    text += "  " + all[i] + "\n";
  }
  return text;
}

StatusOr<ScriptRun> ScriptRunner::Run(const std::string& precision,
                                      const std::vector<std::string>& keep) {
  const std::filesystem::path dir = work_ / ("run" + std::to_string(++runs_));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Status::IOError("cannot make " + dir.string() + ": " + error.message());
  const std::filesystem::path log = dir / "log.txt";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).parent_path() /
                           "graphdump";
  std::vector<std::string> args = {self, "python", "--precision", precision};
  if (flags_.steps > 0) {
    args.push_back("--steps");
    args.push_back(std::to_string(flags_.steps));
  }
  if (!keep.empty()) {
    args.push_back("--keep-fp32");
    args.insert(args.end(), keep.begin(), keep.end());
  }
  args.push_back("--");
  args.insert(args.end(), flags_.script.begin(), flags_.script.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) return Status::Internal(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // The rounds dump nothing: the configuration of the environment is the user's own runs'.
    unsetenv("GRAPHDUMP_CONFIG");
    unsetenv("MINDSPORE_DUMP_CONFIG");
    setenv("GRAPHDUMP_PRECISION_OUT", dir.c_str(), 1);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execv(argv[0], argv.data());
    std::fprintf(stderr, "cannot execute %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  Status failure = Status::Ok();
  if (code != 0) {
    failure = Status::Internal("the script failed in its " + precision + " run (exit " +
                               std::to_string(code) + "); its output ends:\n" + Tail(log, 12) +
                               "the run: " + [&] {
                                 std::string line;
                                 for (size_t i = 1; i < args.size(); ++i) {
                                   line += (i > 1 ? " " : "graphdump ") + ShellWord(args[i]);
                                 }
                                 return line;
                               }());
  }
  ScriptRun run;
  run.failure = failure;
  std::ifstream in(dir / "run.json");
  nlohmann::json report = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded() || !report.is_object()) {
    if (!failure.ok()) return failure;
    return Status::Internal("the script's " + precision + " run wrote no readable " +
                            (dir / "run.json").string());
  }
  for (const auto& k : report.value("kernels", nlohmann::json::array())) {
    KernelInfo kernel;
    kernel.graph_id = k.value("graph_id", 0u);
    kernel.full_name = k.value("full_name", "");
    kernel.op_type = k.value("op_type", "");
    kernel.module_path = k.value("module_path", "");
    for (const auto& f : k.value("source_trace", nlohmann::json::array())) {
      kernel.source_trace.push_back({f.value("file", ""), f.value("line", 0), 0,
                                     f.value("code", "")});
    }
    run.kernels.push_back(std::move(kernel));
  }
  run.states = report.value("states", std::vector<std::string>());
  if (!failure.ok()) return run;
  const int outputs = report.value("outputs", 0);
  for (int i = 0; i < outputs; ++i) {
    GRAPHDUMP_ASSIGN_OR_RETURN(at::Tensor t,
                               ReadNpy((dir / ("output_" + std::to_string(i) + ".npy")).string()));
    run.outputs.push_back(t);
  }
  return run;
}

// Where two runs' kernels first differ, or "" when they are the same.
std::string KernelDifference(const std::vector<KernelInfo>& first,
                             const std::vector<KernelInfo>& now) {
  for (size_t i = 0; i < std::max(first.size(), now.size()); ++i) {
    const std::string a = i < first.size() ? first[i].full_name : "(none)";
    const std::string b = i < now.size() ? now[i].full_name : "(none)";
    if (a != b) {
      return "kernel " + std::to_string(i + 1) + " of the run is " + b + " where the first " +
             "low-precision run had " + a;
    }
  }
  return "";
}

}  // namespace

int RunScriptBisect(const std::string& command, const BisectFlags& flags,
                    const BisectOptions& options) {
  std::error_code error;
  // The rounds' dumps go into $TMPDIR (else /tmp).
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string pattern = dir + "/graphdump-bisect-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return Fail(command, Status::IOError("cannot make a temporary directory in " + dir +
                                         " ($TMPDIR): " + std::strerror(errno)));
  }
  const std::filesystem::path work = pattern;
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{work};
  ScriptRunner runner(flags, work);
  std::vector<KernelInfo> kernels;
  std::vector<std::string> states;
  BisectPrinter printer(flags, kernels, states);
  printer.Header();
  auto reference = runner.Run("fp32", {});
  if (!reference.ok()) return Fail(command, reference.status());
  if (!reference->failure.ok()) return Fail(command, reference->failure);
  if (reference->outputs.empty()) {
    return Fail(command, Status::InvalidArgument(
                             "the script's first module returned no floating tensor (or the "
                             "script called no torch.nn.Module): nothing to compare"));
  }
  bool first = true;
  const BisectMeasure measure = [&](const std::vector<size_t>& kept) -> StatusOr<double> {
    std::vector<std::string> names;
    for (size_t id : kept) {
      names.push_back(id < kernels.size() ? kernels[id].full_name : states[id - kernels.size()]);
    }
    GRAPHDUMP_ASSIGN_OR_RETURN(ScriptRun run, runner.Run(flags.precision, names));
    if (first) {
      if (!run.failure.ok()) return run.failure;
      kernels = run.kernels;
      states = run.states;
      first = false;
    } else if (std::string difference = KernelDifference(kernels, run.kernels);
               !difference.empty()) {
      return Status::InvalidArgument(
          "the script's kernels changed between rounds: " + difference +
          ". Rounds match kernels by name, so each run must call the same kernels in the same "
          "order: fix the script's seeds and data order, or bisect fewer --steps");
    }
    if (!run.failure.ok()) return run.failure;
    return MaxRelativeL2Error(run.outputs, reference->outputs);
  };
  BisectResult result;
  Status status = BisectSearch(
      measure,
      [&](BisectResult* r) {
        r->kernel_count = kernels.size();
        for (size_t i = 0; i < kernels.size() + states.size(); ++i) r->candidates.push_back(i);
        return Status::Ok();
      },
      options.tolerance, [&](const BisectRound& round) { printer.Round(round); }, &result);
  if (!status.ok()) return Fail(command, status);
  if (flags.json) {
    std::printf("%s\n", printer.Json(result).dump(2).c_str());
  } else {
    printer.Result(result);
  }
  if (result.outcome == BisectResult::Outcome::kUnreachable) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), printer.Unreachable(result).c_str());
    return kExitFinding;
  }
  return kExitOk;
}

}  // namespace graphdump::tools
