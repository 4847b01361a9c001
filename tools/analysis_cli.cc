#include "analysis_cli.h"

#include <fmt/format.h>

#include "commands.h"
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
  const Status written = WriteUserFile(path, {text});
  if (written.ok()) return kExitOk;
  fmt::print(stderr, "{}: error: {}\n", command, written.message());
  return kExitFailure;
}

std::string OrderTag(int64_t order) { return order >= 0 ? fmt::format(" #{}", order) : ""; }

std::optional<analysis::DumpIndex> OpenDump(const std::string& command, const std::string& dir,
                                            int* exit_code) {
  auto index = analysis::IndexDump(dir);
  if (!index.ok()) {
    fmt::print(stderr, "{}: error: {}\n", command, index.status().message());
    const StatusCode code = index.status().code();
    *exit_code = code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument
                     ? kExitUsage
                     : kExitFailure;
    return std::nullopt;
  }
  for (const std::string& warning : index->warnings) {
    fmt::print(stderr, "{}: warning: {}\n", command, warning);
  }
  return std::move(index).value();
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

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace graphdump::tools
