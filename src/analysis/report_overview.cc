// report: the ranks section (report_chart.h): a rank selector listing every rank with what was
// found in it, and a rank-by-iteration overview of the hits and failing kernels, so a dump of
// hundreds of ranks shows where to look while the charts show one rank.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/internal/report_chart.h"
#include "graphdump/internal/report_parts.h"

namespace graphdump::analysis::report_internal {
namespace {

// What was found in one rank.
struct RankFindings {
  int64_t hits = 0, failing = 0;
  const WatchHit* first_hit = nullptr;
  const KernelComparison* first_failing = nullptr;
  std::map<int64_t, int64_t> per_iteration;  // hits and failing kernels by iteration
};

std::string OptionText(uint32_t rank, const RankFindings& f, bool watch, bool compare) {
  std::string text = fmt::format("rank {}", rank);
  if (watch) {
    text += fmt::format(": {} hit{}", f.hits, f.hits == 1 ? "" : "s");
    if (f.first_hit) {
      text += fmt::format(" (first: iteration {}, {} {})", f.first_hit->iteration,
                          ShortName(f.first_hit->kernel), f.first_hit->check);
    }
  }
  if (compare) {
    text += fmt::format("{} {} failing kernel{}", watch ? ";" : ":", f.failing,
                        f.failing == 1 ? "" : "s");
    if (f.first_failing) {
      text += fmt::format(" (first: iteration {}, {})", f.first_failing->iteration,
                          ShortName(f.first_failing->name_a));
    }
  }
  return text;
}

}  // namespace

void RanksSection(const ReportInput& input, Page* page) {
  std::map<uint32_t, RankFindings> found;
  if (input.watch) {
    // The hits may be the first ones and each rank's first only: the counts cover every hit.
    for (const WatchHit& h : input.watch->hits) {
      RankFindings& f = found[h.rank];
      if (!f.first_hit) f.first_hit = &h;
    }
    for (const auto& [at, count] : input.watch->hit_counts) {
      RankFindings& f = found[at.first];
      f.hits += static_cast<int64_t>(count);
      f.per_iteration[at.second] += static_cast<int64_t>(count);
    }
  }
  if (input.compare) {
    // The shown kernels hold each rank's first failing kernel; the counts cover every kernel.
    for (const KernelComparison& k : input.compare->shown.kernels) {
      if (k.verdict != Verdict::kError || !IsComputed(k.op_type, k.iteration)) continue;
      RankFindings& f = found[k.rank];
      if (!f.first_failing) f.first_failing = &k;
    }
    for (const auto& [at, count] : input.compare->failing) {
      RankFindings& f = found[at.first];
      f.failing += count;
      f.per_iteration[at.second] += count;
    }
  }
  page->html += fmt::format(
      "<section id=\"ranks\">\n<h2>Ranks</h2>\n<p>The dump holds {} rank{}; the charts below show "
      "rank {}. Choose a rank to see what was found in it; <code>graphdump report ... --rank "
      "R</code> charts rank R.</p>\n<p><label>Rank <select id=\"rank-selector\">\n",
      input.ranks.size(), input.ranks.size() == 1 ? "" : "s", input.rank);
  for (const ReportRank& r : input.ranks) {
    page->html += fmt::format(
        "<option value=\"{}\"{}>{}</option>\n", r.rank, r.rank == input.rank ? " selected" : "",
        Escape(OptionText(r.rank, found[r.rank], input.watch, input.compare)));
  }
  page->html +=
      "</select></label></p>\n<p id=\"rank-note\"></p>\n<div class=\"overview\" "
      "id=\"chart-overview\"></div>\n</section>\n";

  // The overview: one row per rank, one column per iteration (or per group of iterations).
  std::vector<int64_t> iterations;
  for (const ReportRank& r : input.ranks) {
    iterations.insert(iterations.end(), r.iterations.begin(), r.iterations.end());
  }
  std::sort(iterations.begin(), iterations.end());
  iterations.erase(std::unique(iterations.begin(), iterations.end()), iterations.end());
  if (input.ranks.empty() || iterations.empty()) return;
  const size_t most = std::clamp<size_t>(kOverviewCells / input.ranks.size(), 1, 200);
  const size_t per_column = (iterations.size() + most - 1) / most;
  nlohmann::json columns = nlohmann::json::array(), ranks = nlohmann::json::array(),
                 cells = nlohmann::json::array();
  for (size_t c = 0; c < iterations.size(); c += per_column) {
    const int64_t last = iterations[std::min(c + per_column, iterations.size()) - 1];
    columns.push_back(last == iterations[c] ? std::to_string(last)
                                            : fmt::format("{}-{}", iterations[c], last));
  }
  for (const ReportRank& r : input.ranks) {
    ranks.push_back(r.rank);
    std::vector<int64_t> row(columns.size(), 0);
    for (const auto& [iteration, count] : found[r.rank].per_iteration) {
      auto at = std::lower_bound(iterations.begin(), iterations.end(), iteration);
      if (at == iterations.end() || *at != iteration) continue;  // constants
      row[static_cast<size_t>(at - iterations.begin()) / per_column] += count;
    }
    // Ranks without the column's iterations are -1 (nothing dumped), not 0 (nothing found).
    for (size_t c = 0; c < columns.size(); ++c) {
      const int64_t from = iterations[c * per_column];
      const int64_t to = iterations[std::min((c + 1) * per_column, iterations.size()) - 1];
      auto at = std::lower_bound(r.iterations.begin(), r.iterations.end(), from);
      if (row[c] == 0 && (at == r.iterations.end() || *at > to)) row[c] = -1;
    }
    cells.push_back(std::move(row));
  }
  page->overview = {{"ranks", std::move(ranks)},     {"columns", std::move(columns)},
                    {"cells", std::move(cells)},     {"rank", input.rank},
                    {"what", input.compare ? (input.watch ? "hits and failing kernels"
                                                          : "failing kernels")
                                           : "hits"}};
}

}  // namespace graphdump::analysis::report_internal
