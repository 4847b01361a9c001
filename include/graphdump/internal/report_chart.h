// report's internals: the chart model (report_chart.cc: what report.js draws, as JSON), the
// chart sections of the page (report_sections.cc) and what the page's HTML (report.cc) shares
// with them. Not for use outside src/analysis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/report.h"

namespace graphdump::analysis::report_internal {

// HTML text: & < > " escaped.
std::string Escape(const std::string& s);

// The last two scope components ("layer5-Layer/Mul-op5"), at most 32 characters: an axis label.
std::string ShortName(const std::string& full_name);

// A chart as report.js draws it: one x position per point, series of values parallel to points.
// A value is a number, NaN or +-inf (drawn as marked points in bands above and below the plot,
// never dropped and never as 0), or nullopt (no value: nothing drawn).
struct ChartPoint {
  size_t x = 0;        // position along the whole series (a downsampled chart keeps some)
  std::string name;    // full kernel name (hover, data-kernel attributes)
  std::string label;   // axis label
  std::string detail;  // hover text: iteration, counts, verdict
};

struct ChartSeries {
  std::string name;
  std::string color;
  std::vector<std::optional<double>> values;  // parallel to Chart::points
};

struct ChartMarker {
  size_t index = 0;       // into Chart::points
  std::string css_class;  // "first-divergence", "first-hit", "hit", "iteration-boundary"
  std::string id;         // element id, may be empty
  std::string label;
};

struct Chart {
  std::string id;  // drawn into <div id="chart-{id}">
  std::string title;
  std::string x_title;
  bool log_y = false;
  bool kernel_axis = true;  // x labels are kernel names (rotated), else iterations
  int width = 920, height = 200;
  size_t x_count = 0;  // positions along the x axis: the whole series, of which `points` are kept
  std::vector<ChartPoint> points;  // ascending x
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;
};

Chart MakeChart(std::string id, std::string title, std::string x_title, bool log_y,
                bool kernel_axis, int width, int height);

// The chart as report.js reads it from the page's JSON block.
nlohmann::json ChartJson(const Chart& c);

// Downsampling (report_downsample.cc): a series of any length is drawn in a few hundred pixel
// columns. Of the `x.size()` points at positions `x` (ascending, below `x_count`), the ones to
// keep, ascending: in each of `buckets` equal spans of positions and for each series, the point
// holding its lowest finite value, the one holding its highest, and the first NaN, +Inf and -Inf;
// and every point in `always` (markers: the first hit, the first divergence). Everything is kept
// when x_count <= buckets.
std::vector<size_t> KeptPoints(const std::vector<size_t>& x, size_t x_count,
                               const std::vector<const std::vector<std::optional<double>>*>& series,
                               const std::vector<size_t>& always, size_t buckets);

// Pixel columns of two pixels each across the chart's plot area.
size_t ChartBuckets(int width);

// `c` with only the points KeptPoints keeps for `buckets` (markers kept and renumbered; of
// many iteration boundaries, one per eight columns).
Chart Downsample(const Chart& c, size_t buckets);

// Charts that share their points, built without them: series hold the values of positions
// 0..count-1 and markers index those positions. Returns them with the points that any of them
// keeps (Downsample's choice at ChartBuckets of each one's width), made by make_point(position)
// for those positions only, so a series of millions costs its values, not its labels.
std::vector<Chart> SharePoints(std::vector<Chart> charts, size_t count,
                               const std::function<ChartPoint(size_t)>& make_point);

// JSON for a <script> element: "<" never appears raw, so no "</script>" or "<!--" can end it.
std::string ScriptSafeJson(const nlohmann::json& j);

// The page under construction: HTML in order, and the charts its placeholders name. Charts are
// added downsampled to ChartBuckets(width).
struct Page {
  std::string html;
  std::vector<Chart> charts;
  nlohmann::json overview;  // the rank-by-iteration grid report.js draws (RanksSection)

  void Add(Chart chart) {
    html += "<div class=\"chart\" id=\"chart-" + chart.id + "\"></div>\n";
    if (chart.x_count == 0) {  // the whole series: point i at position i
      for (size_t i = 0; i < chart.points.size(); ++i) chart.points[i].x = i;
      chart.x_count = chart.points.size();
    }
    charts.push_back(chart.points.size() > ChartBuckets(chart.width)
                         ? Downsample(chart, ChartBuckets(chart.width))
                         : std::move(chart));
  }
};

// The first failing computed kernel of `rank` (as FirstFailingKernel, within one rank): an index
// into r.kernels, or -1. The charts of a rank mark it; the first divergence of the comparison is
// that of its first rank with one.
int64_t FirstFailingInRank(const CompareResult& r, uint32_t rank);

// The replay of kernel `index` of the comparison, or null.
const ReplayNote* ReplayOf(const std::vector<ReplayNote>& replays, int64_t index);

// The page's chart sections: the comparison along the execution order (cosine, errors, the
// error each kernel adds), statistics along the execution order of the focus iteration, and
// statistics of the selected kernels across iterations. `hits`: every hit of the charted rank
// (ReportInput::rank_hits), null without watchpoints.
void CompareSection(const CompareResult& r, uint32_t rank, const std::vector<ReplayNote>& replays,
                    Page* page);
void OrderSection(const std::vector<OrderSeries>& order, const std::vector<WatchHit>* hits,
                  const CompareResult* compare, Page* page);
void SeriesSection(const std::vector<KernelSeries>& series, uint32_t rank, size_t iterations,
                   const std::vector<WatchHit>* hits, Page* page);

// The rank selector and the rank-by-iteration overview (report_overview.cc): every rank with its
// hits and failing kernels, and where they are; at most kOverviewCells cells (iterations grouped
// into columns when there are more).
inline constexpr size_t kOverviewCells = 200'000;
void RanksSection(const ReportInput& input, Page* page);

}  // namespace graphdump::analysis::report_internal
