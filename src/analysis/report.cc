// report: one self-contained HTML page. report_data.cc gathers the numbers, report_sections.cc
// turns them into charts (report_chart.cc's model, written as one JSON block) and this file
// writes the page around them: the summary and the tables. report.js (inlined with d3.js, see
// report_assets.h) draws the charts. Tables are plain HTML, so the page still says what happened
// without scripts.
#include "graphdump/analysis/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/internal/report_assets.h"
#include "graphdump/internal/report_chart.h"
#include "graphdump/internal/report_parts.h"

namespace graphdump::analysis {
namespace {

using Json = nlohmann::json;
using report_internal::Chart;
using report_internal::Escape;
using report_internal::IsComputed;
using report_internal::Page;
using report_internal::ReplayOf;

// Every kernel adding error, ranked, with its numbers and replay verdict.
void AddingErrorTable(const ReportComparison& c, const std::vector<ReplayNote>& replays,
                      std::string* html) {
  const CompareResult& r = c.shown;
  if (c.contributors == 0) return;
  *html += fmt::format(
      "<details id=\"adding-error-table\" open><summary>Kernels adding error ({}, largest "
      "first)</summary>\n<table><tr><th>#</th><th>iteration</th><th>kernel</th><th>source</th>"
      "<th>inputs' error</th><th>outputs' error</th><th>growth</th><th>replay</th>"
      "<th>keep in float32</th></tr>\n",
      c.contributors);
  auto number = [](double v) {
    return std::isnan(v) ? std::string("-") : fmt::format("{:.3g}", v);
  };
  for (size_t i = 0; i < r.contributors.size() && i < kReportRowsShown; ++i) {
    const int64_t index = r.contributors[i];
    const KernelComparison& k = r.kernels[index];
    const ReplayNote* replay = ReplayOf(replays, index);
    // The advice of the verdict model (precision_verdict.h), for the first rows.
    const std::string chain = i < c.chains.size() ? c.chains[i] : "";
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

void CompareTables(const ReportComparison& c, std::string* html) {
  const CompareResult& r = c.shown;
  *html += fmt::format(
      "<details id=\"compare-table\"><summary>Kernels that did not pass ({}; first 200)</summary>\n"
      "<table><tr><th>#</th><th>rank</th><th>graph</th><th>iteration</th><th>kernel</th>"
      "<th>verdict</th><th>reason</th><th>source</th></tr>\n",
      c.not_passed);
  size_t shown = 0;
  for (size_t i = 0; i < r.kernels.size() && shown < kReportRowsShown; ++i) {
    const KernelComparison& k = r.kernels[i];
    if (k.verdict == Verdict::kPass) continue;
    ++shown;
    html->append(fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        VerdictName(k.verdict), c.positions[i], k.rank, k.graph_id, k.iteration, Escape(k.name_a),
        IsComputed(k.op_type, k.iteration) ? "" : " (parameter or constant)",
        VerdictName(k.verdict), Escape(k.reason), Escape(k.source_line)));
  }
  *html += "</table></details>\n";
  if (c.unpaired > 0 || c.skipped > 0) {
    *html += fmt::format(
        "<details id=\"compare-unpaired\"><summary>Unpaired kernels ({}) and skipped files ({})"
        "</summary>\n<ul>\n",
        c.unpaired, c.skipped);
    for (size_t i = 0; i < r.unpaired.size() && i < kReportRowsShown; ++i) {
      const UnpairedKernel& u = r.unpaired[i];
      *html += fmt::format("<li>only in {}: rank {} graph {} iteration {} <code>{}</code></li>\n",
                           u.side, u.rank, u.graph_id, u.iteration, Escape(u.full_name));
    }
    for (size_t i = 0; i < r.skipped.size() && i < kReportRowsShown; ++i) {
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
      w.hits.size() + w.dropped_hits);
  for (size_t i = 0; i < w.hits.size() && i < kReportHitsShown; ++i) {
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

// The page's JSON block: the charts and the overview, in kReportChartBytes at most: charts whose
// data do not fit are drawn in half the columns, then a quarter... (each keeps its marked
// points and every column's extremes and first non-finite values).
std::string ReportData(const Page& page) {
  std::string text;
  for (size_t halve = 0; halve < 16; ++halve) {
    Json charts = Json::array();
    for (const Chart& c : page.charts) {
      charts.push_back(report_internal::ChartJson(
          halve == 0 ? c
                     : report_internal::Downsample(
                           c, std::max<size_t>(report_internal::ChartBuckets(c.width) >> halve, 4))));
    }
    text = report_internal::ScriptSafeJson(
        {{"charts", std::move(charts)}, {"overview", page.overview}});
    if (text.size() <= kReportChartBytes) break;
  }
  return text;
}

std::string Summary(const ReportInput& input) {
  std::string html = "<section id=\"summary\"><ul>\n";
  if (input.compare) {
    const ReportComparison& c = *input.compare;
    const CompareResult* r = &c.shown;
    html += fmt::format(
        "<li>{} kernel comparisons: {} pass, {} warning, {} error; {} unpaired, {} skipped "
        "files.</li>\n",
        c.kernels, r->passed, r->warnings, r->errors, c.unpaired, c.skipped);
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
          Escape(h.check), Escape(h.detail), w->hits.size() + w->dropped_hits);
    }
  }
  return html + "</ul></section>\n";
}

}  // namespace

namespace report_internal {

// HTML text; bytes that are not UTF-8 (a file name can hold any) become U+FFFD, so the page is
// the UTF-8 it declares.
std::string Escape(const std::string& text) {
  const std::string s = graphdump::internal::ValidUtf8(text);
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

}  // namespace report_internal

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
  if (!input.notes.empty()) {
    page.html += "<section id=\"notes\">\n<ul>\n";
    for (const std::string& note : input.notes) {
      page.html += "<li class=\"warning\">" + Escape(note) + "</li>\n";
    }
    page.html += "</ul>\n</section>\n";
  }
  page.html += Summary(input);
  report_internal::RanksSection(input, &page);
  page.html +=
      "<noscript><p>The charts are drawn by the page's inline script; with scripts off, the "
      "tables below still list every finding.</p></noscript>\n<section id=\"plots\">\n";
  const CompareResult* compare = input.compare ? &input.compare->shown : nullptr;
  if (compare) report_internal::CompareSection(*compare, input.rank, input.replays, &page);
  const std::vector<WatchHit>* rank_hits = input.watch ? &input.rank_hits : nullptr;
  report_internal::OrderSection(input.order, rank_hits, compare, &page);
  report_internal::SeriesSection(input.series, input.rank, input.iterations, rank_hits, &page);
  page.html += "</section>\n<section id=\"tables\">\n<h2>Tables</h2>\n";
  if (input.compare) AddingErrorTable(*input.compare, input.replays, &page.html);
  if (input.compare) CompareTables(*input.compare, &page.html);
  if (input.watch) WatchTable(*input.watch, &page.html);
  page.html += "</section>\n";
  page.html += "<script type=\"application/json\" id=\"report-data\">" + ReportData(page) +
               "</script>\n";
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
