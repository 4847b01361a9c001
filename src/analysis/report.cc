// report: one self-contained HTML page with inline SVG plots (no scripts, no network).
#include "graphdump/analysis/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/tensor_math.h"

namespace graphdump::analysis {
namespace {

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

struct Line {
  std::string name;
  std::string color;
  std::vector<double> x, y;
};

constexpr int kWidth = 900, kHeight = 260, kLeft = 70, kRight = 20, kTop = 20, kBottom = 40;

// A line chart. `marker_x` (when finite) draws the first-divergence marker.
std::string SvgChart(const std::string& title, const std::vector<Line>& lines, bool log_y,
                     double marker_x = NAN, const std::string& marker_label = "") {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  // Log plots draw zeros at a tenth of the smallest positive value.
  double floor = INFINITY;
  for (const Line& l : lines)
    for (double v : l.y)
      if (v > 0 && std::isfinite(v)) floor = std::min(floor, v);
  floor = std::isfinite(floor) ? floor / 10 : 1e-12;
  auto ty = [&](double v) { return log_y ? std::log10(std::max(v, floor)) : v; };
  for (const Line& l : lines) {
    for (size_t i = 0; i < l.x.size(); ++i) {
      if (!std::isfinite(l.y[i])) continue;
      x0 = std::min(x0, l.x[i]);
      x1 = std::max(x1, l.x[i]);
      y0 = std::min(y0, ty(l.y[i]));
      y1 = std::max(y1, ty(l.y[i]));
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1, y0 -= 1;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (ty(y) - y0) / (y1 - y0)) * ph; };
  std::string svg = fmt::format(
      "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n<title>{}</title>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
      kWidth, kHeight, kWidth, kHeight, Escape(title), Escape(title), kLeft, kTop, pw, ph);
  for (int i = 0; i <= 4; ++i) {  // y axis ticks
    const double v = y0 + (y1 - y0) * i / 4;
    const double y = kTop + (1 - i / 4.0) * ph;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
        kLeft, y, kLeft + pw, y, kLeft - 4, y + 3,
        log_y ? fmt::format("{:.2g}", std::pow(10.0, v)) : fmt::format("{:.8g}", v));
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"10\">{:g}</text><text x=\"{}\" y=\"{}\" "
      "font-size=\"10\" text-anchor=\"end\">{:g}</text>\n",
      kLeft, kHeight - kBottom + 14, x0, kLeft + pw, kHeight - kBottom + 14, x1);
  int legend = 0;
  for (const Line& l : lines) {
    std::string points;
    for (size_t i = 0; i < l.x.size(); ++i) {
      if (!std::isfinite(l.y[i])) continue;
      points += fmt::format("{:.1f},{:.1f} ", px(l.x[i]), py(l.y[i]));
    }
    svg += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
        "points=\"{}\"/>\n<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{}\">{}</text>\n",
        l.color, points, kLeft + 10 + 160 * legend, kHeight - 8, l.color, Escape(l.name));
    ++legend;
  }
  if (std::isfinite(marker_x)) {
    const double x = px(marker_x);
    svg += fmt::format(
        "<g id=\"first-divergence\" class=\"first-divergence\"><line x1=\"{:.1f}\" y1=\"{}\" "
        "x2=\"{:.1f}\" y2=\"{}\" stroke=\"#d00\" stroke-width=\"2\" stroke-dasharray=\"4 2\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" fill=\"#d00\">{}</text></g>\n",
        x, kTop, x, kTop + ph, x + 4, kTop + 12, Escape(marker_label));
  }
  return svg + "</svg>\n";
}

std::string CompareSection(const CompareResult& r) {
  std::string html = fmt::format(
      "<h2>Comparison</h2>\n<p>{} kernels compared: {} pass, {} warning, {} error; {} unpaired, "
      "{} skipped files.</p>\n",
      r.kernels.size(), r.passed, r.warnings, r.errors, r.unpaired.size(), r.skipped.size());
  Line cosine{"cosine similarity", "#1f77b4", {}, {}};
  Line max_abs{"max abs err", "#d62728", {}, {}};
  Line max_rel{"max rel err", "#ff7f0e", {}, {}};
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    double cos = 1, mabs = 0, mrel = 0;
    bool any = false;
    for (const TensorComparison& t : r.kernels[i].tensors) {
      if (t.mode != "tensor") continue;
      any = true;
      cos = std::min(cos, t.metrics.cosine);
      mabs = std::max(mabs, t.metrics.max_abs_err);
      mrel = std::max(mrel, t.metrics.max_rel_err);
    }
    if (!any) continue;
    cosine.x.push_back(i);
    cosine.y.push_back(cos);
    max_abs.x.push_back(i);
    max_abs.y.push_back(mabs);
    max_rel.x.push_back(i);
    max_rel.y.push_back(mrel);
  }
  double marker = NAN;
  std::string label;
  if (r.first_failure >= 0) {
    const KernelComparison& f = r.kernels[r.first_failure];
    marker = static_cast<double>(r.first_failure);
    label = "first divergence: " + f.op_type;
    html += fmt::format(
        "<p class=\"first-divergence-text\"><b>First divergence</b> (execution order #{}): "
        "<code>{}</code>, iteration {}{}<br>{}</p>\n",
        r.first_failure, Escape(f.name_a), f.iteration,
        f.source_line.empty() ? "" : ", source " + Escape(f.source_line), Escape(f.reason));
  } else {
    html += "<p>No kernel failed.</p>\n";
  }
  html += "<p>x axis: kernels in execution order (all compared iterations in sequence).</p>\n";
  html += "<h3>Cosine similarity (lowest over the kernel's tensors)</h3>\n";
  html += SvgChart("cosine similarity along execution order", {cosine}, false, marker, label);
  html += "<h3>Max abs and max rel error (highest over the kernel's tensors, log scale)</h3>\n";
  html += SvgChart("max abs / max rel error along execution order (log10)", {max_abs, max_rel},
                   true, marker, label);
  html +=
      "<table><tr><th>#</th><th>iteration</th><th>kernel</th><th>verdict</th><th>reason"
      "</th><th>source</th></tr>\n";
  int shown = 0;
  for (size_t i = 0; i < r.kernels.size() && shown < 200; ++i) {
    const KernelComparison& k = r.kernels[i];
    if (k.verdict == Verdict::kPass) continue;
    ++shown;
    html += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        VerdictName(k.verdict), i, k.iteration, Escape(k.name_a), VerdictName(k.verdict),
        Escape(k.reason), Escape(k.source_line));
  }
  return html + "</table>\n";
}

std::string WatchSection(const WatchResult& w) {
  std::string html = fmt::format(
      "<h2>Watchpoint hits</h2>\n<p>{} tensors checked, {} hits, {} skipped files.</p>\n"
      "<table id=\"watch-hits\"><tr><th>iteration</th><th>kernel</th><th>tensor</th><th>check"
      "</th><th>detail</th><th>source</th></tr>\n",
      w.tensors_checked, w.hits.size(), w.skipped.size());
  for (size_t i = 0; i < w.hits.size() && i < 500; ++i) {
    const WatchHit& h = w.hits[i];
    html += fmt::format(
        "<tr{}><td>{}</td><td><code>{}</code></td><td>{} {}</td><td>{}</td><td>{}</td><td>{}"
        "</td></tr>\n",
        i == 0 ? " class=\"first-hit\"" : "", h.iteration, Escape(h.kernel),
        h.is_input ? "input" : "output", h.slot, Escape(h.check), Escape(h.detail),
        Escape(h.source_line));
  }
  return html + "</table>\n";
}

std::string SeriesSection(const std::vector<KernelSeries>& series) {
  std::string html = "<h2>Statistics across iterations</h2>\n";
  if (series.empty()) return html + "<p>No kernel selected.</p>\n";
  for (const KernelSeries& s : series) {
    std::vector<double> x(s.iterations.begin(), s.iterations.end());
    html += "<h3><code>" + Escape(s.kernel) + "</code> output 0</h3>\n";
    html += SvgChart(s.kernel,
                     {{"max", "#d62728", x, s.max},
                      {"min", "#1f77b4", x, s.min},
                      {"mean", "#2ca02c", x, s.mean},
                      {"l2norm", "#9467bd", x, s.l2norm}},
                     false);
  }
  return html;
}

}  // namespace

std::vector<KernelSeries> CollectKernelSeries(const DumpIndex& index, const std::string& filter,
                                              size_t limit) {
  std::vector<KernelSeries> series;
  for (const RankEntry& r : index.ranks) {
    for (const GraphEntry& g : r.graphs) {
      for (const IterationEntry& it : g.iterations) {
        if (it.iteration < 0) continue;
        for (const KernelEntry& k : it.kernels) {
          if (k.is_parameter || (!filter.empty() && k.full_name.find(filter) == std::string::npos))
            continue;
          auto s = std::find_if(series.begin(), series.end(),
                                [&](const KernelSeries& x) { return x.kernel == k.full_name; });
          if (s == series.end()) {
            if (series.size() >= limit) continue;
            series.push_back({k.full_name, {}, {}, {}, {}, {}});
            s = series.end() - 1;
          }
          auto out = std::find_if(k.tensors.begin(), k.tensors.end(),
                                  [](const TensorEntry& t) { return !t.is_input && t.slot == 0; });
          if (out == k.tensors.end()) continue;
          TensorSummary sum;
          if (!out->path.empty()) {
            auto npy = OpenTensor(*out);
            if (!npy.ok()) continue;
            sum = SummarizeTensor(**npy);
          } else if (out->stats) {
            auto get = [&](const char* c) {
              auto v = out->stats->values.find(c);
              return v == out->stats->values.end() ? NAN : std::strtod(v->second.c_str(), nullptr);
            };
            sum.max = get("Max Value");
            sum.min = get("Min Value");
            sum.mean = get("Avg Value");
            sum.l2norm = get("L2Norm Value");
          } else {
            continue;
          }
          s->iterations.push_back(it.iteration);
          s->max.push_back(sum.max);
          s->min.push_back(sum.min);
          s->mean.push_back(sum.mean);
          s->l2norm.push_back(sum.l2norm);
        }
      }
    }
  }
  return series;
}

std::string RenderReportHtml(const ReportInput& input) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
      Escape(input.title) +
      "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1000px}"
      "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;"
      "text-align:left}tr.error td{background:#fdd}tr.warning td{background:#ffd}"
      "tr.first-hit td{background:#fcc;font-weight:bold}svg.plot{display:block;margin:1em 0}"
      "code{font-size:11px}</style>\n</head><body>\n<h1>" +
      Escape(input.title) + "</h1>\n";
  if (input.compare) html += CompareSection(*input.compare);
  if (input.watch) html += WatchSection(*input.watch);
  html += SeriesSection(input.series);
  return html + "</body></html>\n";
}

}  // namespace graphdump::analysis
