// report: the page's chart sections (report_chart.h): the comparison along the execution order,
// statistics along the order of one iteration, and of chosen kernels across iterations.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "graphdump/internal/report_chart.h"
#include "graphdump/internal/report_parts.h"

namespace graphdump::analysis::report_internal {
namespace {

// "; 3 NaN, 1 +Inf of 32 elements", the counts the dump holds; empty when it holds none.
std::string CountsText(const StatPoint& p) {
  std::vector<std::string> parts;
  if (p.nan_count >= 0) parts.push_back(fmt::format("{} NaN", p.nan_count));
  if (p.pos_inf_count >= 0) parts.push_back(fmt::format("{} +Inf", p.pos_inf_count));
  if (p.neg_inf_count >= 0) parts.push_back(fmt::format("{} -Inf", p.neg_inf_count));
  std::string s = fmt::format("{}", fmt::join(parts, ", "));
  if (p.elements >= 0) s += fmt::format("{}{} elements", s.empty() ? "" : " of ", p.elements);
  return s.empty() ? s : "; " + s;
}

// Two charts over statistic points: max/min/mean (linear) and l2norm (log scale); point i is
// made by make_point(i) when the downsampled charts keep it.
void AddStatCharts(Page* page, const std::string& id, const std::string& what,
                   const std::vector<StatPoint>& stats,
                   const std::function<ChartPoint(size_t)>& make_point, bool kernel_axis,
                   const std::vector<ChartMarker>& markers, int width) {
  const std::string x_title = kernel_axis ? "kernels in execution order" : "iteration";
  Chart values =
      MakeChart(id + "-values", what + ": max, min, mean", x_title, false, kernel_axis, width, 200);
  Chart norm = MakeChart(id + "-l2norm", what + ": l2norm (log scale)", x_title, true, kernel_axis,
                         width, 160);
  values.markers = norm.markers = markers;
  ChartSeries max{"max", "#d62728", {}}, min{"min", "#1f77b4", {}}, mean{"mean", "#2ca02c", {}},
      l2{"l2norm", "#9467bd", {}};
  for (const StatPoint& p : stats) {
    max.values.push_back(p.max);
    min.values.push_back(p.min);
    mean.values.push_back(p.mean);
    l2.values.push_back(p.l2norm);
  }
  // A statistic the dump does not hold (statistic.csv without "Avg Value") gets no legend entry.
  for (ChartSeries* s : {&max, &min, &mean}) {
    if (std::any_of(s->values.begin(), s->values.end(), [](const auto& v) { return v; })) {
      values.series.push_back(std::move(*s));
    }
  }
  norm.series = {std::move(l2)};
  for (Chart& c : SharePoints({std::move(values), std::move(norm)}, stats.size(), make_point)) {
    page->Add(std::move(c));
  }
}

// Worst of the values: the lowest (cosine) or highest (errors); NaN wins, it is the news.
void Worse(std::optional<double>* acc, double v, bool lowest) {
  if (acc->has_value() && std::isnan(**acc)) return;
  if (!acc->has_value() || std::isnan(v) || (lowest ? v < **acc : v > **acc)) *acc = v;
}

// The worst metrics of a kernel's inputs or of its outputs; nullopt where none was compared.
struct SideMetrics {
  std::optional<double> cosine, max_abs, max_rel;  // over the tensors compared as tensors
  std::optional<double> stat_diff;                 // over the tensors compared by statistics
};

SideMetrics WorstOf(const KernelComparison& k, bool inputs) {
  SideMetrics w;
  for (const TensorComparison& t : k.tensors) {
    if (t.is_input != inputs) continue;
    if (t.mode == "tensor") {
      // The metrics are over the pairs where both sides are finite; where NaN or Inf sits in
      // one side only, |a-b| over the whole tensor is NaN (or Inf): draw that, not the rest.
      const PairMetrics& m = t.metrics;
      const bool mismatch = m.nonfinite_mismatches > 0;
      const double whole = m.nan_a > 0 || m.nan_b > 0 ? NAN : INFINITY;
      Worse(&w.cosine, mismatch ? NAN : m.cosine, true);
      Worse(&w.max_abs, mismatch ? whole : m.max_abs_err, false);
      Worse(&w.max_rel, mismatch ? whole : m.max_rel_err, false);
    } else if (t.mode == "statistic") {
      for (const auto& [column, diff] : t.stat_diffs) Worse(&w.stat_diff, diff, false);
    }
  }
  return w;
}

std::optional<double> Measured(double v) {
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

// "#1 adds error x118 (replay: inaccurate)".
std::string AddsErrorLabel(const KernelComparison& k, const ReplayNote* replay) {
  std::string label = fmt::format("#{} adds error", k.contribution_rank);
  if (std::isfinite(k.growth)) label += fmt::format(" x{:.3g}", k.growth);
  if (replay) label += " (replay: " + replay->verdict + ")";
  return label;
}

// "iteration 2", "iteration 2, call 1" (a kernel called more than once in the iteration).
std::string IterationText(const StatPoint& p) {
  return p.calls > 1 ? fmt::format("iteration {}, call {}", p.iteration, p.call)
                     : fmt::format("iteration {}", p.iteration);
}

std::string OrderPointDetail(const StatPoint& p) {
  return fmt::format("{}, output 0{}", IterationText(p), CountsText(p));
}

}  // namespace

int64_t FirstFailingInRank(const CompareResult& r, uint32_t rank) {
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelComparison& k = r.kernels[i];
    if (k.rank == rank && k.verdict == Verdict::kError && IsComputed(k.op_type, k.iteration)) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

const ReplayNote* ReplayOf(const std::vector<ReplayNote>& replays, int64_t index) {
  for (const ReplayNote& n : replays) {
    if (n.kernel == index) return &n;
  }
  return nullptr;
}

// The comparison's charts for one rank. Each is one point per computed kernel and iteration of
// the rank, with series of values parallel to them: a view over more per-kernel numbers (the
// inputs' error beside the outputs') is one more ChartSeries filled in the loop, or one more
// Chart sharing the points. Points are made only for what the downsampled charts keep.
void CompareSection(const CompareResult& r, uint32_t rank, const std::vector<ReplayNote>& replays,
                    Page* page) {
  page->html += fmt::format("<h2>Comparison along the execution order (rank {})</h2>\n", rank);
  // Parameters and constants are compared too (the tables list them) but are not kernels of the
  // order, so they are not drawn.
  Chart cosine = MakeChart("compare-cosine", "cosine similarity along the execution order",
                           "kernels in execution order", false, true, 920, 200);
  Chart errors =
      MakeChart("compare-errors", "max abs / max rel error along the execution order (log scale)",
                "kernels in execution order", true, true, 920, 200);
  Chart attribution = MakeChart(
      "compare-attribution",
      "error the kernels add: norm rel err of their inputs and of their outputs (log scale)",
      "kernels in execution order", true, true, 920, 220);
  ChartSeries cos{"cosine similarity", "#1f77b4", {}}, abs{"max abs err", "#d62728", {}},
      rel{"max rel err", "#ff7f0e", {}}, stat{"statistics rel diff", "#8c564b", {}},
      in_err{"inputs' norm rel err", "#2ca02c", {}},
      out_err{"outputs' norm rel err", "#9467bd", {}};
  std::vector<ChartMarker> adding;
  int64_t global_first = -1;
  FirstFailingKernel(r, &global_first);
  const int64_t first_position = FirstFailingInRank(r, rank);
  std::tuple<uint32_t, int64_t> group{~0u, -2};
  size_t groups = 0;
  std::vector<size_t> drawn;  // the kernels drawn, as indices into r.kernels
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelComparison& k = r.kernels[i];
    if (k.rank != rank || !IsComputed(k.op_type, k.iteration)) continue;
    // The kernel's outputs; its inputs only when no output was compared (an input-only dump).
    const bool outputs =
        std::any_of(k.tensors.begin(), k.tensors.end(),
                    [](const TensorComparison& t) { return !t.is_input && t.mode != "missing"; });
    const SideMetrics w = WorstOf(k, /*inputs=*/!outputs);
    const size_t index = drawn.size();
    if (std::make_tuple(k.graph_id, k.iteration) != group) {
      group = {k.graph_id, k.iteration};
      if (groups++ > 0) {
        cosine.markers.push_back(
            {index, "iteration-boundary", "", fmt::format("iteration {}", k.iteration)});
      }
    }
    drawn.push_back(i);
    cos.values.push_back(w.cosine);
    abs.values.push_back(w.max_abs);
    rel.values.push_back(w.max_rel);
    stat.values.push_back(w.stat_diff);
    in_err.values.push_back(Measured(k.input_error));
    out_err.values.push_back(Measured(k.output_error));
    if (k.adds_error && k.contribution_rank > 0 &&
        static_cast<size_t>(k.contribution_rank) <= kKernelsAddingErrorMarked) {
      adding.push_back(
          {index, "adds-error", "", AddsErrorLabel(k, ReplayOf(replays, static_cast<int64_t>(i)))});
    }
    if (static_cast<int64_t>(i) == first_position) {
      const bool global = first_position == global_first;
      cosine.markers.push_back(
          {index, "first-divergence", global ? "first-divergence" : "",
           fmt::format("first divergence{}: {}", global ? "" : fmt::format(" of rank {}", rank),
                       ShortName(k.name_a))});
    }
  }
  if (drawn.empty()) {
    page->html += fmt::format("<p>No computed kernel of rank {} was compared.</p>\n", rank);
    return;
  }
  errors.markers = cosine.markers;
  for (ChartMarker& m : errors.markers) m.id.clear();  // ids are unique in the page
  attribution.markers = errors.markers;
  attribution.markers.insert(attribution.markers.end(), adding.begin(), adding.end());
  attribution.series = {std::move(in_err), std::move(out_err)};
  cosine.series = {std::move(cos)};
  errors.series = {std::move(abs), std::move(rel)};
  // Kernels compared only by their statistics get their own series, not a made-up tensor error.
  if (std::any_of(stat.values.begin(), stat.values.end(), [](const auto& v) { return v; })) {
    errors.series.push_back(std::move(stat));
  }
  auto make_point = [&](size_t position) {
    const KernelComparison& k = r.kernels[drawn[position]];
    std::string detail =
        fmt::format("rank {}, graph {}, iteration {}{}: {}", k.rank, k.graph_id, k.iteration,
                    k.calls > 1 ? fmt::format(", call {}", k.call) : "", VerdictName(k.verdict));
    if (!k.reason.empty()) detail += " (" + k.reason + ")";
    if (k.name_b != k.name_a) detail += "; paired with " + k.name_b;
    if (!k.source_line.empty()) detail += "; source " + k.source_line;
    return ChartPoint{position, k.name_a, ShortName(k.name_a), std::move(detail)};
  };
  std::vector<Chart> charts = SharePoints(
      {std::move(cosine), std::move(errors), std::move(attribution)}, drawn.size(), make_point);
  page->html +=
      "<p>One point per kernel and iteration, kernels in execution order (hover a point or a "
      "label for the full name). Values of the kernel's outputs (its inputs where only inputs "
      "were dumped).</p>\n<h3>Cosine similarity (lowest over the kernel's tensors)</h3>\n";
  page->Add(std::move(charts[0]));
  page->html += "<h3>Max abs and max rel error (highest over the kernel's tensors)</h3>\n";
  page->Add(std::move(charts[1]));
  page->html +=
      "<h3>Error added: inputs against outputs</h3>\n<p>A kernel whose outputs' error stands "
      "far above its inputs' adds error; one whose two errors are alike inherits it "
      "(docs/precision.md). The kernels adding the most are marked, with their replay verdict "
      "when replayed.</p>\n";
  page->Add(std::move(charts[2]));
}

void OrderSection(const std::vector<OrderSeries>& order, const std::vector<WatchHit>* hits,
                  const CompareResult* compare, Page* page) {
  if (order.empty()) return;
  page->html += fmt::format(
      "<h2>Statistics along the execution order (rank {}, iteration {})</h2>\n<p>Output 0 of "
      "every kernel the graph computes, in execution order.</p>\n",
      order[0].rank, order[0].iteration);
  const int64_t first_position = compare ? FirstFailingInRank(*compare, order[0].rank) : -1;
  for (const OrderSeries& o : order) {
    if (order.size() > 1) page->html += fmt::format("<h3>Graph {}</h3>\n", o.graph_id);
    if (o.points.empty()) {
      page->html += "<p>No output of a computed kernel was dumped in this iteration.</p>\n";
      continue;
    }
    auto position = [&o](const std::string& kernel, uint32_t call) {
      for (size_t i = 0; i < o.points.size(); ++i) {
        if (o.points[i].call == call && o.points[i].kernel == kernel) return i;
      }
      return SIZE_MAX;
    };
    auto make_point = [&o](size_t i) {
      const StatPoint& p = o.points[i];
      return ChartPoint{i, p.kernel,
                        p.calls > 1 ? fmt::format("{} call {}", ShortName(p.kernel), p.call)
                                    : ShortName(p.kernel),
                        OrderPointDetail(p)};
    };
    std::vector<ChartMarker> markers;
    if (hits) {
      for (const WatchHit& h : *hits) {
        if (h.rank != o.rank || h.graph_id != o.graph_id || h.iteration != o.iteration) continue;
        const size_t at = position(h.kernel, h.call);
        if (at == SIZE_MAX) continue;
        markers.push_back({at, "first-hit", "", "first hit: " + h.check});
        break;
      }
    }
    if (first_position >= 0) {
      const KernelComparison& k = compare->kernels[first_position];
      const size_t at = position(k.name_a, k.call);
      if (k.rank == o.rank && k.graph_id == o.graph_id && k.iteration == o.iteration &&
          at != SIZE_MAX) {
        markers.push_back({at, "first-divergence", "", "first divergence"});
      }
    }
    AddStatCharts(page, fmt::format("order-{}", o.graph_id), "output 0 along the order", o.points,
                  make_point, true, markers, 920);
  }
}

void SeriesSection(const std::vector<KernelSeries>& series, uint32_t rank, size_t iterations,
                   const std::vector<WatchHit>* hits, Page* page) {
  page->html += "<h2>Statistics across iterations</h2>\n";
  if (iterations <= 1) {
    page->html +=
        "<p>The dump holds one iteration: the charts along the execution order above show "
        "every kernel of it.</p>\n";
    return;
  }
  if (series.empty()) {
    page->html += "<p>No kernel selected.</p>\n";
    return;
  }
  for (size_t n = 0; n < series.size(); ++n) {
    const KernelSeries& s = series[n];
    page->html += "<h3><code>" + Escape(s.kernel) + "</code> output 0</h3>\n<div class=\"pair\">";
    std::vector<ChartMarker> markers;
    std::set<int64_t> hit_iterations;
    if (hits) {
      for (const WatchHit& h : *hits) {
        if (h.kernel == s.kernel && h.rank == rank) hit_iterations.insert(h.iteration);
      }
    }
    for (size_t i = 0; i < s.points.size(); ++i) {
      if (hit_iterations.erase(s.points[i].iteration)) {  // one marker per iteration
        markers.push_back({i, "hit", "", "hit"});
      }
    }
    auto make_point = [&s](size_t i) {
      const StatPoint& p = s.points[i];
      return ChartPoint{
          i, s.kernel,
          p.calls > 1 ? fmt::format("{}.{}", p.iteration, p.call) : std::to_string(p.iteration),
          OrderPointDetail(p)};
    };
    AddStatCharts(page, fmt::format("series-{}", n), "output 0", s.points, make_point, false,
                  markers, 455);
    page->html += "</div>\n";
  }
}

}  // namespace graphdump::analysis::report_internal
