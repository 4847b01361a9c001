// report's internals: the chart model (report_chart.cc: what report.js draws, as JSON), the
// chart sections of the page (report_sections.cc) and what the page's HTML (report.cc) shares
// with them. Not for use outside src/analysis.
#pragma once

#include <cstddef>
#include <cstdint>
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
  std::vector<ChartPoint> points;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;
};

Chart MakeChart(std::string id, std::string title, std::string x_title, bool log_y,
                bool kernel_axis, int width, int height);

// The chart as report.js reads it from the page's JSON block.
nlohmann::json ChartJson(const Chart& c);

// JSON for a <script> element: "<" never appears raw, so no "</script>" or "<!--" can end it.
std::string ScriptSafeJson(const nlohmann::json& j);

// The page under construction: HTML in order, and the charts its placeholders name.
struct Page {
  std::string html;
  std::vector<Chart> charts;

  void Add(Chart chart) {
    html += "<div class=\"chart\" id=\"chart-" + chart.id + "\"></div>\n";
    charts.push_back(std::move(chart));
  }
};

// The replay of kernel `index` of the comparison, or null.
const ReplayNote* ReplayOf(const std::vector<ReplayNote>& replays, int64_t index);

// The page's chart sections: the comparison along the execution order (cosine, errors, the
// error each kernel adds), statistics along the execution order of the focus iteration, and
// statistics of the selected kernels across iterations.
void CompareSection(const CompareResult& r, const std::vector<ReplayNote>& replays, Page* page);
void OrderSection(const std::vector<OrderSeries>& order, const WatchResult* watch,
                  const CompareResult* compare, Page* page);
void SeriesSection(const std::vector<KernelSeries>& series, size_t iterations,
                   const WatchResult* watch, Page* page);

}  // namespace graphdump::analysis::report_internal
