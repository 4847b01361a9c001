// What report.cc (the page) and report_data.cc (the numbers) share. Not for use outside
// src/analysis.
#pragma once

#include <cstdint>
#include <string>

namespace graphdump::analysis::report_internal {

// Parameters, constants and graph inputs are written as op type "Parameter" (docs/layout.md); they
// are not kernels the graph computes, so no divergence marker sits on them.
inline bool IsComputed(const std::string& op_type, int64_t iteration) {
  return op_type != "Parameter" && iteration >= 0;
}

}  // namespace graphdump::analysis::report_internal
