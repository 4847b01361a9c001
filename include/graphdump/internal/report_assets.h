// The scripts `graphdump report` inlines into its pages, as bytes (generated at build time by
// src/analysis/CMakeLists.txt, so the installed binary needs no package at run time).
#pragma once

#include <cstddef>
#include <string_view>

namespace graphdump::analysis::internal {

extern const unsigned char kD3Js[];  // Debian's libjs-d3 d3.min.js (d3 3.x, BSD-3-Clause)
extern const size_t kD3JsSize;
extern const unsigned char kReportJs[];  // src/analysis/report.js: draws the charts
extern const size_t kReportJsSize;

inline std::string_view D3Js() { return {reinterpret_cast<const char*>(kD3Js), kD3JsSize}; }
inline std::string_view ReportJs() {
  return {reinterpret_cast<const char*>(kReportJs), kReportJsSize};
}

}  // namespace graphdump::analysis::internal
