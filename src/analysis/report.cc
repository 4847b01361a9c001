// report: one self-contained HTML page. The C++ side (report_data.cc) gathers the numbers and
// this file writes them as one JSON block of chart descriptions; report.js (inlined with d3.js, see
// report_assets.h) draws them. Tables are plain HTML, so the page still says what happened without
// scripts.
#include "graphdump/analysis/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/internal/report_assets.h"
#include "graphdump/internal/report_parts.h"
#include "graphdump/stats.h"

namespace graphdump::analysis {
namespace {

using Json = nlohmann::json;
using report_internal::IsComputed;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The last two scope components ("layer5-Layer/Mul-op5"), at most 32 characters: an axis label.
std::string ShortName(const std::string& full_name) {
  size_t cut = full_name.rfind('/');
  if (cut != std::string::npos && cut > 0) {
    const size_t parent = full_name.rfind('/', cut - 1);
    cut = parent == std::string::npos ? 0 : parent + 1;
  } else {
    cut = 0;
  }
  std::string s = full_name.substr(cut);
  if (s.size() > 32) s = "\u2026" + s.substr(s.size() - 31);
  return s;
}

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
                bool kernel_axis, int width, int height) {
  Chart c;
  c.id = std::move(id);
  c.title = std::move(title);
  c.x_title = std::move(x_title);
  c.log_y = log_y;
  c.kernel_axis = kernel_axis;
  c.width = width;
  c.height = height;
  return c;
}

Json ValueJson(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isnan(*v)) return "NaN";
  if (std::isinf(*v)) return *v > 0 ? "Inf" : "-Inf";
  return *v;
}

Json ChartJson(const Chart& c) {
  Json points = Json::array(), series = Json::array(), markers = Json::array();
  for (const ChartPoint& p : c.points) {
    points.push_back({{"name", p.name}, {"label", p.label}, {"detail", p.detail}});
  }
  for (const ChartSeries& s : c.series) {
    Json values = Json::array();
    for (const auto& v : s.values) values.push_back(ValueJson(v));
    series.push_back({{"name", s.name}, {"color", s.color}, {"values", std::move(values)}});
  }
  for (const ChartMarker& m : c.markers) {
    markers.push_back(
        {{"index", m.index}, {"class", m.css_class}, {"id", m.id}, {"label", m.label}});
  }
  return {{"id", c.id},
          {"title", c.title},
          {"x_title", c.x_title},
          {"log_y", c.log_y},
          {"kernel_axis", c.kernel_axis},
          {"width", c.width},
          {"height", c.height},
          {"points", std::move(points)},
          {"series", std::move(series)},
          {"markers", std::move(markers)}};
}

// The page under construction: HTML in order, and the charts its placeholders name.
struct Page {
  std::string html;
  std::vector<Chart> charts;

  void Add(Chart chart) {
    html += fmt::format("<div class=\"chart\" id=\"chart-{}\"></div>\n", chart.id);
    charts.push_back(std::move(chart));
  }
};

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

// Two charts over statistic points: max/min/mean (linear) and l2norm (log scale).
void AddStatCharts(Page* page, const std::string& id, const std::string& what,
                   const std::vector<StatPoint>& stats, std::vector<ChartPoint> points,
                   bool kernel_axis, const std::vector<ChartMarker>& markers, int width) {
  const std::string x_title = kernel_axis ? "kernels in execution order" : "iteration";
  Chart values =
      MakeChart(id + "-values", what + ": max, min, mean", x_title, false, kernel_axis, width, 200);
  Chart norm = MakeChart(id + "-l2norm", what + ": l2norm (log scale)", x_title, true, kernel_axis,
                         width, 160);
  values.points = points;
  norm.points = std::move(points);
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
  norm.series = {l2};
  page->Add(std::move(values));
  page->Add(std::move(norm));
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

// The comparison's charts. Each is one point per computed kernel and iteration (`points`) with
// series of values parallel to it: a view over more per-kernel numbers (the inputs' error beside
// the outputs') is one more ChartSeries filled in the loop, or one more Chart sharing `points`.
// The replay of kernel `index` of the comparison, or null.
const ReplayNote* ReplayOf(const std::vector<ReplayNote>& replays, int64_t index) {
  for (const ReplayNote& n : replays) {
    if (n.kernel == index) return &n;
  }
  return nullptr;
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

void CompareSection(const CompareResult& r, const std::vector<ReplayNote>& replays, Page* page) {
  page->html += "<h2>Comparison along the execution order</h2>\n";
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
  int64_t first_position = -1;
  const std::optional<std::string> first = FirstFailingKernel(r, &first_position);
  std::tuple<uint32_t, uint32_t, int64_t> group{~0u, ~0u, -2};
  size_t groups = 0;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelComparison& k = r.kernels[i];
    if (!IsComputed(k.op_type, k.iteration)) continue;
    // The kernel's outputs; its inputs only when no output was compared (an input-only dump).
    const bool outputs =
        std::any_of(k.tensors.begin(), k.tensors.end(),
                    [](const TensorComparison& t) { return !t.is_input && t.mode != "missing"; });
    const SideMetrics w = WorstOf(k, /*inputs=*/!outputs);
    const size_t index = cosine.points.size();
    if (std::make_tuple(k.rank, k.graph_id, k.iteration) != group) {
      group = {k.rank, k.graph_id, k.iteration};
      if (groups++ > 0) {
        cosine.markers.push_back(
            {index, "iteration-boundary", "", fmt::format("iteration {}", k.iteration)});
      }
    }
    std::string detail =
        fmt::format("rank {}, graph {}, iteration {}{}: {}", k.rank, k.graph_id, k.iteration,
                    k.calls > 1 ? fmt::format(", call {}", k.call) : "", VerdictName(k.verdict));
    if (!k.reason.empty()) detail += " (" + k.reason + ")";
    if (k.name_b != k.name_a) detail += "; paired with " + k.name_b;
    if (!k.source_line.empty()) detail += "; source " + k.source_line;
    cosine.points.push_back({k.name_a, ShortName(k.name_a), detail});
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
      cosine.markers.push_back({index, "first-divergence", "first-divergence",
                                "first divergence: " + ShortName(k.name_a)});
    }
  }
  errors.points = cosine.points;
  errors.markers = cosine.markers;
  for (ChartMarker& m : errors.markers) m.id.clear();  // ids are unique in the page
  attribution.points = cosine.points;
  attribution.markers = errors.markers;
  attribution.markers.insert(attribution.markers.end(), adding.begin(), adding.end());
  attribution.series = {in_err, out_err};
  cosine.series = {cos};
  errors.series = {abs, rel};
  // Kernels compared only by their statistics get their own series, not a made-up tensor error.
  if (std::any_of(stat.values.begin(), stat.values.end(), [](const auto& v) { return v; })) {
    errors.series.push_back(stat);
  }
  if (cosine.points.empty()) {
    page->html += "<p>No computed kernel was compared.</p>\n";
    return;
  }
  page->html +=
      "<p>One point per kernel and iteration, kernels in execution order (hover a point or a "
      "label for the full name). Values of the kernel's outputs (its inputs where only inputs "
      "were dumped).</p>\n<h3>Cosine similarity (lowest over the kernel's tensors)</h3>\n";
  page->Add(std::move(cosine));
  page->html += "<h3>Max abs and max rel error (highest over the kernel's tensors)</h3>\n";
  page->Add(std::move(errors));
  page->html +=
      "<h3>Error added: inputs against outputs</h3>\n<p>A kernel whose outputs' error stands "
      "far above its inputs' adds error; one whose two errors are alike inherits it "
      "(docs/precision.md). The kernels adding the most are marked, with their replay verdict "
      "when replayed.</p>\n";
  page->Add(std::move(attribution));
}

// Every kernel adding error, ranked, with its numbers and replay verdict.
void AddingErrorTable(const CompareResult& r, const std::vector<ReplayNote>& replays,
                      std::string* html) {
  if (r.contributors.empty()) return;
  *html += fmt::format(
      "<details id=\"adding-error-table\" open><summary>Kernels adding error ({}, largest "
      "first)</summary>\n<table><tr><th>#</th><th>iteration</th><th>kernel</th><th>source</th>"
      "<th>inputs' error</th><th>outputs' error</th><th>growth</th><th>replay</th>"
      "<th>keep in float32</th></tr>\n",
      r.contributors.size());
  auto number = [](double v) {
    return std::isnan(v) ? std::string("-") : fmt::format("{:.3g}", v);
  };
  for (size_t i = 0; i < r.contributors.size() && i < 200; ++i) {
    const int64_t index = r.contributors[i];
    const KernelComparison& k = r.kernels[index];
    const ReplayNote* replay = ReplayOf(replays, index);
    // The advice of the verdict model (precision_verdict.h), for the first rows.
    const std::string chain = i < 20 ? PrecisionChainText(r, InputChain(r, index), "") : "";
    html->append(fmt::format(
        "<tr data-kernel=\"{}\"><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td class=\"replay-verdict\">{}</td>"
        "<td class=\"float32-chain\">{}</td></tr>\n",
        Escape(k.name_a), i + 1, k.iteration, Escape(k.name_a), Escape(k.source_line),
        number(k.input_error), number(k.output_error), number(k.growth),
        replay ? "<b>" + Escape(replay->verdict) + "</b>" + Escape(replay->words) : "-",
        chain.empty() ? "-" : "<pre>" + Escape(chain) + "</pre>"));
  }
  *html += "</table></details>\n";
}

// "iteration 2", "iteration 2, call 1" (a kernel called more than once in the iteration).
std::string IterationText(const StatPoint& p) {
  return p.calls > 1 ? fmt::format("iteration {}, call {}", p.iteration, p.call)
                     : fmt::format("iteration {}", p.iteration);
}

std::string OrderPointDetail(const StatPoint& p) {
  return fmt::format("{}, output 0{}", IterationText(p), CountsText(p));
}

void OrderSection(const std::vector<OrderSeries>& order, const WatchResult* watch,
                  const CompareResult* compare, Page* page) {
  if (order.empty()) return;
  page->html += fmt::format(
      "<h2>Statistics along the execution order (rank {}, iteration {})</h2>\n<p>Output 0 of "
      "every kernel the graph computes, in execution order.</p>\n",
      order[0].rank, order[0].iteration);
  int64_t first_position = -1;
  if (compare) FirstFailingKernel(*compare, &first_position);
  for (const OrderSeries& o : order) {
    if (order.size() > 1) page->html += fmt::format("<h3>Graph {}</h3>\n", o.graph_id);
    if (o.points.empty()) {
      page->html += "<p>No output of a computed kernel was dumped in this iteration.</p>\n";
      continue;
    }
    std::vector<ChartPoint> points;
    std::map<std::pair<std::string, uint32_t>, size_t> position;  // (kernel, call)
    for (const StatPoint& p : o.points) {
      position.emplace(std::make_pair(p.kernel, p.call), points.size());
      points.push_back({p.kernel,
                        p.calls > 1 ? fmt::format("{} call {}", ShortName(p.kernel), p.call)
                                    : ShortName(p.kernel),
                        OrderPointDetail(p)});
    }
    std::vector<ChartMarker> markers;
    if (watch) {
      for (const WatchHit& h : watch->hits) {
        if (h.rank != o.rank || h.graph_id != o.graph_id || h.iteration != o.iteration) continue;
        auto it = position.find({h.kernel, h.call});
        if (it == position.end()) continue;
        markers.push_back({it->second, "first-hit", "", "first hit: " + h.check});
        break;
      }
    }
    if (first_position >= 0) {
      const KernelComparison& k = compare->kernels[first_position];
      auto it = position.find({k.name_a, k.call});
      if (k.rank == o.rank && k.graph_id == o.graph_id && k.iteration == o.iteration &&
          it != position.end()) {
        markers.push_back({it->second, "first-divergence", "", "first divergence"});
      }
    }
    AddStatCharts(page, fmt::format("order-{}", o.graph_id), "output 0 along the order", o.points,
                  std::move(points), true, markers, 920);
  }
}

void SeriesSection(const std::vector<KernelSeries>& series, size_t iterations,
                   const WatchResult* watch, Page* page) {
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
    std::vector<ChartPoint> points;
    std::vector<ChartMarker> markers;
    std::set<int64_t> hit_iterations;
    if (watch) {
      for (const WatchHit& h : watch->hits) {
        if (h.kernel == s.kernel) hit_iterations.insert(h.iteration);
      }
    }
    for (const StatPoint& p : s.points) {
      if (hit_iterations.count(p.iteration)) {
        markers.push_back({points.size(), "hit", "", "hit"});
        hit_iterations.erase(p.iteration);  // one marker per iteration
      }
      points.push_back(
          {s.kernel,
           p.calls > 1 ? fmt::format("{}.{}", p.iteration, p.call) : std::to_string(p.iteration),
           OrderPointDetail(p)});
    }
    AddStatCharts(page, fmt::format("series-{}", n), "output 0", s.points, std::move(points), false,
                  markers, 455);
    page->html += "</div>\n";
  }
}

void CompareTables(const CompareResult& r, std::string* html) {
  int failing = 0;
  for (const KernelComparison& k : r.kernels) failing += k.verdict != Verdict::kPass;
  *html += fmt::format(
      "<details id=\"compare-table\"><summary>Kernels that did not pass ({}; first 200)</summary>\n"
      "<table><tr><th>#</th><th>rank</th><th>graph</th><th>iteration</th><th>kernel</th>"
      "<th>verdict</th><th>reason</th><th>source</th></tr>\n",
      failing);
  int shown = 0;
  for (size_t i = 0; i < r.kernels.size() && shown < 200; ++i) {
    const KernelComparison& k = r.kernels[i];
    if (k.verdict == Verdict::kPass) continue;
    ++shown;
    html->append(fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        VerdictName(k.verdict), i, k.rank, k.graph_id, k.iteration, Escape(k.name_a),
        IsComputed(k.op_type, k.iteration) ? "" : " (parameter or constant)",
        VerdictName(k.verdict), Escape(k.reason), Escape(k.source_line)));
  }
  *html += "</table></details>\n";
  if (!r.unpaired.empty() || !r.skipped.empty()) {
    *html += fmt::format(
        "<details id=\"compare-unpaired\"><summary>Unpaired kernels ({}) and skipped files ({})"
        "</summary>\n<ul>\n",
        r.unpaired.size(), r.skipped.size());
    for (size_t i = 0; i < r.unpaired.size() && i < 200; ++i) {
      const UnpairedKernel& u = r.unpaired[i];
      *html += fmt::format("<li>only in {}: rank {} graph {} iteration {} <code>{}</code></li>\n",
                           u.side, u.rank, u.graph_id, u.iteration, Escape(u.full_name));
    }
    for (size_t i = 0; i < r.skipped.size() && i < 200; ++i) {
      *html += fmt::format("<li>skipped <code>{}</code>: {}</li>\n", Escape(r.skipped[i].path),
                           Escape(r.skipped[i].reason));
    }
    *html += "</ul></details>\n";
  }
}

void WatchTable(const WatchResult& w, std::string* html) {
  *html += fmt::format(
      "<details id=\"watch-table\"><summary>Watchpoint hits ({}; first 500)</summary>\n"
      "<table id=\"watch-hits\"><tr><th>rank</th><th>graph</th><th>iteration</th><th>kernel</th>"
      "<th>tensor</th><th>check</th><th>detail</th><th>source</th></tr>\n",
      w.hits.size());
  for (size_t i = 0; i < w.hits.size() && i < 500; ++i) {
    const WatchHit& h = w.hits[i];
    html->append(fmt::format(
        "<tr{}><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{} {}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        i == 0 ? " class=\"first-hit\"" : "", h.rank, h.graph_id, h.iteration, Escape(h.kernel),
        h.is_input ? "input" : "output", h.slot, Escape(h.check), Escape(h.detail),
        Escape(h.source_line)));
  }
  *html += "</table></details>\n";
}

std::string Summary(const ReportInput& input) {
  std::string html = "<section id=\"summary\"><ul>\n";
  if (const CompareResult* r = input.compare) {
    html += fmt::format(
        "<li>{} kernel comparisons: {} pass, {} warning, {} error; {} unpaired, {} skipped "
        "files.</li>\n",
        r->kernels.size(), r->passed, r->warnings, r->errors, r->unpaired.size(),
        r->skipped.size());
    int64_t position = -1;
    if (FirstFailingKernel(*r, &position)) {
      const KernelComparison& f = r->kernels[position];
      html += fmt::format(
          "<li class=\"first-divergence-text\"><b>First divergence</b>: <a "
          "href=\"#first-divergence\"><code>{}</code></a> (rank {}, graph {}, iteration {}, "
          "execution order {}){}: {}</li>\n",
          Escape(f.name_a), f.rank, f.graph_id, f.iteration, f.order,
          f.source_line.empty() ? "" : ", source " + Escape(f.source_line), Escape(f.reason));
    } else {
      html += "<li>No computed kernel failed.</li>\n";
    }
    if (!r->differing_sources.empty()) {
      const int64_t source = r->differing_sources.front();
      const KernelComparison& p = r->kernels[source];
      html += fmt::format(
          "<li>A parameter or constant differs{}: <code>{}</code> (iteration {}): {}</li>\n",
          position >= 0 && source < position ? " before it" : "", Escape(p.name_a), p.iteration,
          Escape(p.reason));
    }
  }
  if (const WatchResult* w = input.watch) {
    if (w->hits.empty()) {
      html += fmt::format("<li>No watchpoint hit ({} tensors checked).</li>\n", w->tensors_checked);
    } else {
      const WatchHit& h = w->hits[0];
      html += fmt::format(
          "<li class=\"first-hit-text\"><b>First watchpoint hit</b>: <code>{}</code> {} {} "
          "(rank {}, graph {}, iteration {}){}: {} {}; {} hits in all.</li>\n",
          Escape(h.kernel), h.is_input ? "input" : "output", h.slot, h.rank, h.graph_id,
          h.iteration, h.source_line.empty() ? "" : ", source " + Escape(h.source_line),
          Escape(h.check), Escape(h.detail), w->hits.size());
    }
  }
  return html + "</ul></section>\n";
}

// JSON for a <script> element: "<" never appears raw, so no "</script>" or "<!--" can end it.
std::string ScriptSafeJson(const Json& j) {
  const std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderReportHtml(const ReportInput& input) {
  Page page;
  page.html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:1.5em;max-width:960px}}"
      "h2{{border-bottom:1px solid #ccc;margin-top:1.5em}}h3{{font-size:14px;margin:1em 0 0}}"
      "table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ccc;"
      "padding:2px 6px;text-align:left}}tr.error td{{background:#fdd}}"
      "tr.warning td{{background:#ffd}}tr.first-hit td{{background:#fcc;font-weight:bold}}"
      "details{{margin:.6em 0}}summary{{cursor:pointer;font-weight:bold}}"
      "svg.plot{{display:block;margin:.3em "
      "0;font-size:10px;overflow:visible}}div.pair{{display:flex;gap:10px}}"
      "code{{font-size:11px}}.legend text{{font-size:11px}}.band text{{font-size:10px;"
      "fill:#900}}</style>\n</head><body>\n<h1>{0}</h1>\n",
      Escape(input.title));
  page.html += Summary(input);
  page.html +=
      "<noscript><p>The charts are drawn by the page's inline script; with scripts off, the "
      "tables below still list every finding.</p></noscript>\n<section id=\"plots\">\n";
  if (input.compare) CompareSection(*input.compare, input.replays, &page);
  OrderSection(input.order, input.watch, input.compare, &page);
  SeriesSection(input.series, input.iterations, input.watch, &page);
  page.html += "</section>\n<section id=\"tables\">\n<h2>Tables</h2>\n";
  if (input.compare) AddingErrorTable(*input.compare, input.replays, &page.html);
  if (input.compare) CompareTables(*input.compare, &page.html);
  if (input.watch) WatchTable(*input.watch, &page.html);
  page.html += "</section>\n";
  Json charts = Json::array();
  for (const Chart& c : page.charts) charts.push_back(ChartJson(c));
  page.html += "<script type=\"application/json\" id=\"report-data\">" +
               ScriptSafeJson({{"charts", std::move(charts)}}) + "</script>\n";
  // d3.js is BSD-3-Clause: its notice travels with the copy.
  page.html +=
      "<script>/* D3.js 3.x, Copyright (C) 2013 Michael Bostock, BSD-3-Clause license; "
      "inlined from Debian's libjs-d3. */\n";
  page.html += internal::D3Js();
  page.html += "\n</script>\n<script>\n";
  page.html += internal::ReportJs();
  page.html += "\n</script>\n</body></html>\n";
  return page.html;
}

}  // namespace graphdump::analysis
