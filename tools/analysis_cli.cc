#include "analysis_cli.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/file_system.h"

namespace graphdump::tools {

std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

bool CheckOutputPath(const std::string& command, const std::string& option,
                     const std::string& path) {
  if (path.empty()) return true;
  const std::string problem = OutputPathProblem(path);
  if (problem.empty()) return true;
  fmt::print(stderr, "{}: error: {} {}: {}\n", command, option, path, problem);
  return false;
}

int WriteOutput(const std::string& command, const std::string& path, const std::string& text) {
  return OutputError(command, WriteUserFile(path, {text}));
}

int OutputError(const std::string& command, const Status& written) {
  if (written.ok()) return kExitOk;
  fmt::print(stderr, "{}: error: {}\n", command, written.message());
  // Something other than a regular file at the path (it appeared since CheckOutputPath): usage.
  return written.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int PrintStreamedJson(const std::string& command,
                      const std::function<Status(const std::function<Status(std::string_view)>&)>&
                          write_json) {
  Status written = write_json([](std::string_view text) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) == text.size()) return Status::Ok();
    return Status::IOError(fmt::format("cannot write the JSON: {}", std::strerror(errno)));
  });
  if (written.ok()) std::fputc('\n', stdout);
  if (written.ok() && std::fflush(stdout) != 0) {
    written = Status::IOError(fmt::format("cannot write the JSON: {}", std::strerror(errno)));
  }
  if (written.ok()) return kExitOk;
  fmt::print(stderr, "{}: error: {}\n", command, written.message());
  return kExitFailure;
}

std::string OrderTag(int64_t order) { return order >= 0 ? fmt::format(" #{}", order) : ""; }

void AddToleranceOptions(CLI::App& app, analysis::CompareOptions* options) {
  app.add_option("--atol", options->atol,
                 "absolute tolerance; with --atol or --rtol every tensor pair is checked with "
                 "|a-b| <= atol + rtol*|b| (the one not given: 1e-8 / 1e-5). Default: neither, "
                 "each pair is judged by its dtype's standard (docs/precision.md)");
  app.add_option("--rtol", options->rtol, "relative tolerance (see --atol)");
}

bool ApplyToleranceOptions(const CLI::App& app, const std::string& command,
                           analysis::CompareOptions* options) {
  options->user_tolerances = app.count("--atol") + app.count("--rtol") > 0;
  if (options->atol >= 0 && options->rtol >= 0) return true;
  fmt::print(stderr, "{}: error: --atol and --rtol must be >= 0\n", command);
  return false;
}

std::string CallTag(uint32_t call, uint32_t calls) {
  return calls > 1 ? fmt::format(" call {}", call) : "";
}

int OpenError(const std::string& command, const Status& status) {
  fmt::print(stderr, "{}: error: {}\n", command, status.message());
  const StatusCode code = status.code();
  return code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument ? kExitUsage
                                                                               : kExitFailure;
}

void PrintWarnings(const std::string& command, const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) {
    fmt::print(stderr, "{}: warning: {}\n", command, warning);
  }
}

std::optional<analysis::DumpRanks> ListRanks(const std::string& command, const std::string& dir,
                                             int* exit_code) {
  auto ranks = analysis::ListDumpRanks(dir);
  if (!ranks.ok()) {
    *exit_code = OpenError(command, ranks.status());
    return std::nullopt;
  }
  return std::move(ranks).value();
}

std::optional<analysis::StreamedDump> StreamRanks(
    const std::string& command, analysis::DumpRanks ranks, bool progress,
    const std::function<void(size_t, analysis::DumpIndex&)>& each, int* exit_code) {
  StatusOr<analysis::StreamedDump> streamed =
      analysis::ForEachRank(std::move(ranks), analysis::IndexFilter(), analysis::DefaultThreads(),
                            progress ? "indexing ranks" : "", each);
  if (!streamed.ok()) {
    *exit_code = OpenError(command, streamed.status());
    return std::nullopt;
  }
  PrintWarnings(command, streamed->warnings);
  return std::move(streamed).value();
}

void InOrderPrinter::Put(size_t position, std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  texts_[position] = std::move(text);
  for (; next_ < texts_.size() && texts_[next_]; ++next_) {
    fmt::print("{}", *texts_[next_]);
    texts_[next_].reset();
  }
}

void PrintSkipped(const std::string& command, const std::vector<analysis::Skipped>& skipped) {
  if (skipped.empty()) return;
  fmt::print(stderr, "{}: skipped {} file(s):\n", command, skipped.size());
  for (const analysis::Skipped& s : skipped) {
    if (s.reason.rfind(s.path, 0) == 0) {
      fmt::print(stderr, "  {}\n", s.reason);
    } else {
      fmt::print(stderr, "  {}: {}\n", s.path, s.reason);
    }
  }
}

std::string TableBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace graphdump::tools
