// Source traces in the analysis commands' JSON output: every frame, innermost first, so that a
// script can walk the whole stack the text output sums up in one line (DumpIndex::SourceLine).
#pragma once

#include <vector>

#include "graphdump/graph.h"

namespace graphdump::analysis {

// [{"file": ..., "line": ..., "code": ...}, ...]; `Json` is nlohmann::json (a template, so this
// header does not pull nlohmann into every user of the analysis API).
template <typename Json>
Json SourceTraceJson(const std::vector<SourceLocation>& trace) {
  Json frames = Json::array();
  for (const SourceLocation& loc : trace) {
    frames.push_back({{"file", loc.file}, {"line", loc.line}, {"code", loc.code}});
  }
  return frames;
}

}  // namespace graphdump::analysis
