// From a script line to the kernels it became and their dumped files (issue 4, `trace`).
#pragma once

#include <string>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

struct TraceFile {
  int64_t iteration = 0;
  std::string path;  // tensor file, or "statistic.csv row" description when no file exists
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

// Kernels whose source trace names `file`:`line` (file matched by basename or path suffix).
std::vector<TraceMatch> TraceLine(const DumpIndex& index, const std::string& file, int line);

}  // namespace graphdump::analysis
