// report: downsampling a chart's series to what a screen shows (report_chart.h). Each pixel
// column keeps the extremes of every series, so lines keep their envelope, and the first NaN and
// infinity of each series, so no non-finite value disappears into a column; marked points (the
// first hit, the first divergence) are kept where they are.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "graphdump/internal/report_chart.h"

namespace graphdump::analysis::report_internal {
namespace {

// What one series keeps in one column: where its lowest and highest finite values and its first
// NaN, +Inf and -Inf are (SIZE_MAX: none).
struct Column {
  size_t low = SIZE_MAX, high = SIZE_MAX, nan = SIZE_MAX, pos_inf = SIZE_MAX, neg_inf = SIZE_MAX;
  double low_value = 0, high_value = 0;
};

}  // namespace

size_t ChartBuckets(int width) {
  const int plot = width - 88;  // report.js's left and right margins
  return static_cast<size_t>(std::max(plot / 2, 16));
}

std::vector<size_t> KeptPoints(const std::vector<size_t>& x, size_t x_count,
                               const std::vector<const std::vector<std::optional<double>>*>& series,
                               const std::vector<size_t>& always, size_t buckets) {
  std::vector<char> keep(x.size(), 0);
  if (x_count <= buckets || buckets == 0) {
    std::fill(keep.begin(), keep.end(), 1);
  } else {
    for (const std::vector<std::optional<double>>* values : series) {
      std::vector<Column> columns(buckets);
      for (size_t i = 0; i < x.size() && i < values->size(); ++i) {
        const std::optional<double>& v = (*values)[i];
        if (!v) continue;
        Column& c = columns[static_cast<size_t>(static_cast<double>(x[i]) * buckets / x_count)];
        if (std::isnan(*v)) {
          if (c.nan == SIZE_MAX) c.nan = i;
        } else if (std::isinf(*v)) {
          size_t& first = *v > 0 ? c.pos_inf : c.neg_inf;
          if (first == SIZE_MAX) first = i;
        } else {
          if (c.low == SIZE_MAX || *v < c.low_value) c.low = i, c.low_value = *v;
          if (c.high == SIZE_MAX || *v > c.high_value) c.high = i, c.high_value = *v;
        }
      }
      for (const Column& c : columns) {
        for (size_t i : {c.low, c.high, c.nan, c.pos_inf, c.neg_inf}) {
          if (i != SIZE_MAX) keep[i] = 1;
        }
      }
    }
  }
  for (size_t i : always) {
    if (i < keep.size()) keep[i] = 1;
  }
  std::vector<size_t> kept;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i]) kept.push_back(i);
  }
  return kept;
}

namespace {

// The chart's markers, with at most one iteration boundary per eight columns (every k-th).
std::vector<ChartMarker> ThinMarkers(const std::vector<ChartMarker>& markers, size_t buckets) {
  size_t boundaries = 0;
  for (const ChartMarker& m : markers) boundaries += m.css_class == "iteration-boundary";
  const size_t room = std::max<size_t>(buckets / 8, 1);
  const size_t every = std::max<size_t>(1, (boundaries + room - 1) / room);
  std::vector<ChartMarker> out;
  size_t boundary = 0;
  for (const ChartMarker& m : markers) {
    if (m.css_class == "iteration-boundary" && boundary++ % every != 0) continue;
    out.push_back(m);
  }
  return out;
}

std::vector<size_t> MarkedPoints(const std::vector<ChartMarker>& markers) {
  std::vector<size_t> marked;
  for (const ChartMarker& m : markers) marked.push_back(m.index);
  return marked;
}

std::vector<const std::vector<std::optional<double>>*> SeriesValues(const Chart& c) {
  std::vector<const std::vector<std::optional<double>>*> values;
  for (const ChartSeries& s : c.series) values.push_back(&s.values);
  return values;
}

// `c` (its series and markers) at the `kept` indices (ascending), with `points` as its points.
Chart Subset(const Chart& c, const std::vector<size_t>& kept, std::vector<ChartPoint> points) {
  Chart out = MakeChart(c.id, c.title, c.x_title, c.log_y, c.kernel_axis, c.width, c.height);
  out.x_count = c.x_count;
  out.points = std::move(points);
  std::vector<size_t> renumber(kept.empty() ? 0 : kept.back() + 1, SIZE_MAX);
  for (size_t k = 0; k < kept.size(); ++k) renumber[kept[k]] = k;
  for (const ChartSeries& s : c.series) {
    ChartSeries subset{s.name, s.color, {}};
    subset.values.reserve(kept.size());
    for (size_t i : kept) subset.values.push_back(i < s.values.size() ? s.values[i] : std::nullopt);
    out.series.push_back(std::move(subset));
  }
  for (const ChartMarker& m : c.markers) {
    if (m.index < renumber.size() && renumber[m.index] != SIZE_MAX) {
      out.markers.push_back(m);
      out.markers.back().index = renumber[m.index];
    }
  }
  return out;
}

}  // namespace

std::vector<Chart> SharePoints(std::vector<Chart> charts, size_t count,
                               const std::function<ChartPoint(size_t)>& make_point) {
  std::vector<size_t> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = i;
  std::vector<char> keep(count, 0);
  for (Chart& c : charts) {
    c.x_count = count;
    c.markers = ThinMarkers(c.markers, ChartBuckets(c.width));
    for (size_t i : KeptPoints(x, count, SeriesValues(c), MarkedPoints(c.markers),
                               ChartBuckets(c.width))) {
      keep[i] = 1;
    }
  }
  std::vector<size_t> kept;
  std::vector<ChartPoint> points;
  for (size_t i = 0; i < count; ++i) {
    if (!keep[i]) continue;
    kept.push_back(i);
    points.push_back(make_point(i));
    points.back().x = i;
  }
  std::vector<Chart> out;
  for (const Chart& c : charts) out.push_back(Subset(c, kept, points));
  return out;
}

Chart Downsample(const Chart& c, size_t buckets) {
  std::vector<size_t> x;
  x.reserve(c.points.size());
  for (const ChartPoint& p : c.points) x.push_back(p.x);
  Chart thinned = MakeChart(c.id, c.title, c.x_title, c.log_y, c.kernel_axis, c.width, c.height);
  thinned.x_count = c.x_count;
  thinned.markers = ThinMarkers(c.markers, buckets);
  thinned.series = c.series;
  const std::vector<size_t> kept =
      KeptPoints(x, c.x_count, SeriesValues(c), MarkedPoints(thinned.markers), buckets);
  std::vector<ChartPoint> points;
  for (size_t i : kept) points.push_back(c.points[i]);
  return Subset(thinned, kept, std::move(points));
}

}  // namespace graphdump::analysis::report_internal
