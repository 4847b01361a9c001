// From a script line to the kernels it became and their dumped files (docs/analysis.md,
// `graphdump trace`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

struct TraceFile {
  int64_t iteration = 0;
  uint32_t call = 0;   // which call of the kernel in the iteration (docs/analysis.md)
  uint32_t calls = 1;  // the kernel's calls in the iteration
  std::string path;    // tensor file, or "statistic.csv row" description when no file exists
};

struct TraceMatch {
  uint32_t rank = 0, graph_id = 0;
  std::string full_name;
  std::string location;  // the matching "file:line" as recorded
  std::string code;
  std::vector<SourceLocation> source_trace;  // the kernel's whole trace, innermost first
  std::vector<TraceFile> files;
};

// Splits "model.py:58" into file and line. kInvalidArgument when malformed.
Status ParseFileLine(const std::string& text, std::string* file, int* line);

// Kernels whose source trace names `file`:`line` (file matched by basename or path suffix),
// with their files of every iteration, or of `iteration` only when given.
std::vector<TraceMatch> TraceLine(const DumpIndex& index, const std::string& file, int line,
                                  std::optional<int64_t> iteration = std::nullopt);

}  // namespace graphdump::analysis
