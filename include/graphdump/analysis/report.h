// A self-contained HTML report (inline SVG, no network fetches) over a dump or a comparison.
#pragma once

#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::analysis {

// Statistics of one kernel output across iterations, for the plots.
struct KernelSeries {
  std::string kernel;
  std::vector<int64_t> iterations;
  std::vector<double> max, min, mean, l2norm;
};

// Picks up to `limit` kernels (by `filter` substring of the full name when non-empty, else the
// first ones in execution order) and computes their output-0 statistics per iteration (from
// statistic.csv when there is no file).
std::vector<KernelSeries> CollectKernelSeries(const DumpIndex& index, const std::string& filter,
                                              size_t limit);

struct ReportInput {
  std::string title;
  const CompareResult* compare = nullptr;  // error metrics along the execution order
  const WatchResult* watch = nullptr;      // table of hits
  std::vector<KernelSeries> series;        // statistics across iterations
};

// The HTML text. The first divergence is drawn as an SVG element with id "first-divergence"
// and class "first-divergence"; every plot is an <svg class="plot">.
std::string RenderReportHtml(const ReportInput& input);

}  // namespace graphdump::analysis
