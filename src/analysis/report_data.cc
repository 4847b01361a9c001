// report: the numbers the page shows, gathered from the dump and the results of compare and
// watch (report.h): statistics of output 0 along the execution order and across iterations, and
// the rank and iteration the charts look at.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/report.h"
#include "graphdump/internal/report_chart.h"
#include "graphdump/internal/report_parts.h"
#include "graphdump/statistic_catalogue.h"
#include "graphdump/stats.h"

namespace graphdump::analysis {
namespace {

using report_internal::IsComputed;

// From a statistic.csv row: the value of `category`'s column when it is there and a number
// ("nan", "inf" and "-inf" included).
std::optional<double> RowValue(const StatisticRow& row, StatCategory category) {
  const std::optional<std::string_view> cell = row.values.Find(StatCategoryColumn(category));
  if (!cell) return std::nullopt;
  const std::string copy(*cell);
  const char* text = copy.c_str();
  char* end = nullptr;
  const double d = std::strtod(text, &end);
  if (end == text) return std::nullopt;
  return d;
}

int64_t RowCount(const StatisticRow& row, StatCategory category) {
  const std::optional<double> v = RowValue(row, category);
  return v && std::isfinite(*v) ? static_cast<int64_t>(*v) : -1;
}

// Output 0's statistics, or nullopt when the kernel has none, its file cannot be read or it holds
// uninitialised memory (the output of `empty`: not data).
std::optional<StatPoint> ReadStatPoint(const KernelEntry& k, int64_t iteration) {
  auto out = std::find_if(k.tensors.begin(), k.tensors.end(),
                          [](const TensorEntry& t) { return !t.is_input && t.slot == 0; });
  if (out == k.tensors.end() || out->uninitialized) return std::nullopt;
  StatPoint p;
  p.kernel = k.full_name;
  p.iteration = iteration;
  p.call = k.call;
  p.calls = k.calls;
  if (out->stats) {
    const StatisticRow& row = *out->stats;
    p.max = RowValue(row, StatCategory::kMax);
    p.min = RowValue(row, StatCategory::kMin);
    p.mean = RowValue(row, StatCategory::kAvg);
    p.l2norm = RowValue(row, StatCategory::kL2Norm);
    p.elements = RowCount(row, StatCategory::kCount);
    if (p.elements < 0 && !row.shape.empty()) {
      p.elements = 1;
      for (int64_t d : row.shape) p.elements *= d;  // ParseStatisticCsv checked it fits
    }
    p.nan_count = RowCount(row, StatCategory::kNanCount);
    p.pos_inf_count = RowCount(row, StatCategory::kPositiveInfCount);
    p.neg_inf_count = RowCount(row, StatCategory::kNegativeInfCount);
    if (p.max || p.min || p.mean || p.l2norm) return p;
  }
  if (out->path.empty()) return std::nullopt;
  auto npy = OpenTensor(*out);
  if (!npy.ok()) return std::nullopt;
  // The core's statistics: what statistic.csv would say (NaN when any element is NaN).
  const NanPropagatingStats s =
      ComputeStats((*npy)->info().dtype, (*npy)->data(), (*npy)->NumElements(), StatsRequest{});
  p.max = s.max;
  p.min = s.min;
  p.mean = s.avg;
  p.l2norm = s.l2norm;
  p.elements = static_cast<int64_t>(s.count);
  p.nan_count = static_cast<int64_t>(s.nan_count);
  p.pos_inf_count = static_cast<int64_t>(s.positive_inf_count);
  p.neg_inf_count = static_cast<int64_t>(s.negative_inf_count);
  if (s.count == 0) p.max = p.min = p.mean = std::nullopt;  // an empty tensor has no extremes
  return p;
}

// Rank `rank`'s summary, else the first rank's; null when there is none.
const ReportRankSummary* FindSummary(const std::vector<ReportRankSummary>& ranks, uint32_t rank) {
  for (const ReportRankSummary& r : ranks) {
    if (r.rank.rank == rank) return &r;
  }
  return ranks.empty() ? nullptr : &ranks[0];
}

const RankEntry* FindRank(const DumpIndex& index, uint32_t rank) {
  for (const RankEntry& r : index.ranks) {
    if (r.rank == rank) return &r;
  }
  return index.ranks.empty() ? nullptr : &index.ranks[0];
}

}  // namespace

std::optional<std::string> FirstFailingKernel(const CompareResult& compare, int64_t* position) {
  // `kernels` is sorted by rank, graph, iteration and order; the first error among computed
  // kernels in that order is the first divergence (CompareDumps' first_failure skips
  // parameters and constants too; a CompareRanks result's does not).
  for (size_t i = 0; i < compare.kernels.size(); ++i) {
    const KernelComparison& k = compare.kernels[i];
    if (k.verdict != Verdict::kError || !IsComputed(k.op_type, k.iteration)) continue;
    if (position) *position = static_cast<int64_t>(i);
    return k.name_a;
  }
  if (position) *position = -1;
  return std::nullopt;
}

ReportRankSummary SummarizeReportRank(const RankEntry& rank) {
  ReportRankSummary out;
  out.rank.rank = rank.rank;
  std::set<int64_t> iterations;
  bool first_graph = true;
  for (const GraphEntry& g : rank.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration < 0) continue;
      iterations.insert(it.iteration);
      if (first_graph) out.last_iteration = it.iteration;  // ascending: the last one wins
    }
    if (!g.iterations.empty()) first_graph = false;
  }
  out.rank.iterations.assign(iterations.begin(), iterations.end());
  return out;
}

ReportFocus ChooseReportFocus(const std::vector<ReportRankSummary>& ranks,
                              const WatchResult* watch, const CompareResult* compare) {
  ReportFocus focus;
  if (watch) {
    for (const WatchHit& h : FirstHitPerRank(*watch)) {
      if (h.iteration < 0) continue;
      return {h.rank, h.iteration};
    }
  }
  int64_t position = -1;
  if (compare && FirstFailingKernel(*compare, &position)) {
    const KernelComparison& k = compare->kernels[position];
    return {k.rank, k.iteration};
  }
  const ReportRankSummary* rank = FindSummary(ranks, 0);
  if (!rank) return focus;
  return {rank->rank.rank, rank->last_iteration};
}

ReportFocus ChooseReportFocus(const DumpIndex& index, const WatchResult* watch,
                              const CompareResult* compare) {
  std::vector<ReportRankSummary> ranks;
  for (const RankEntry& r : index.ranks) ranks.push_back(SummarizeReportRank(r));
  return ChooseReportFocus(ranks, watch, compare);
}

std::vector<KernelSeries> CollectKernelSeries(const DumpIndex& index, uint32_t rank_id,
                                              const SeriesSelection& selection) {
  std::vector<KernelSeries> series;
  const RankEntry* rank = FindRank(index, rank_id);
  if (!rank || selection.limit == 0) return series;
  // The kernels, in execution order of their first appearance.
  std::vector<std::string> names;
  std::set<std::string> known;
  for (const GraphEntry& g : rank->graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration < 0) continue;
      for (const KernelEntry& k : it.kernels) {
        if (known.insert(k.full_name).second) names.push_back(k.full_name);
      }
    }
  }
  std::vector<std::string> chosen;
  auto take = [&](const std::string& name) {
    if (chosen.size() < selection.limit &&
        std::find(chosen.begin(), chosen.end(), name) == chosen.end()) {
      chosen.push_back(name);
    }
  };
  if (!selection.filter.empty()) {
    for (const std::string& n : names) {
      if (n.find(selection.filter) != std::string::npos) take(n);
    }
  } else {
    for (const std::string& n : selection.preferred) {
      if (known.count(n)) take(n);
    }
    if (chosen.empty()) {
      for (const GraphEntry& g : rank->graphs) {
        for (const IterationEntry& it : g.iterations) {
          for (const KernelEntry& k : it.kernels) {
            if (IsComputed(k.op_type, it.iteration)) take(k.full_name);
          }
        }
      }
    }
  }
  // In execution order, whatever order the preferred names came in.
  std::stable_sort(chosen.begin(), chosen.end(), [&](const std::string& a, const std::string& b) {
    return std::find(names.begin(), names.end(), a) < std::find(names.begin(), names.end(), b);
  });
  for (const std::string& name : chosen) series.push_back({name, {}});
  for (const GraphEntry& g : rank->graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration < 0) continue;
      for (const KernelEntry& k : it.kernels) {
        auto s = std::find_if(series.begin(), series.end(),
                              [&](const KernelSeries& x) { return x.kernel == k.full_name; });
        if (s == series.end()) continue;
        if (std::optional<StatPoint> p = ReadStatPoint(k, it.iteration)) {
          s->points.push_back(std::move(*p));
        }
      }
    }
  }
  for (KernelSeries& s : series) {
    std::stable_sort(s.points.begin(), s.points.end(), [](const StatPoint& a, const StatPoint& b) {
      return std::tie(a.iteration, a.call) < std::tie(b.iteration, b.call);
    });
  }
  return series;
}

std::vector<OrderSeries> CollectOrderSeries(const DumpIndex& index, const ReportFocus& focus,
                                            int threads) {
  std::vector<OrderSeries> result;
  const RankEntry* rank = FindRank(index, focus.rank);
  if (!rank) return result;
  for (const GraphEntry& g : rank->graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration != focus.iteration) continue;
      std::vector<const KernelEntry*> kernels;
      for (const KernelEntry& k : it.kernels) {
        if (IsComputed(k.op_type, it.iteration)) kernels.push_back(&k);
      }
      std::vector<std::optional<StatPoint>> points(kernels.size());
      ParallelFor(kernels.size(), threads > 0 ? threads : DefaultThreads(), "report: kernels",
                  [&](size_t i) { points[i] = ReadStatPoint(*kernels[i], it.iteration); });
      OrderSeries o{rank->rank, g.graph_id, it.iteration, {}};
      for (auto& p : points) {
        if (p) o.points.push_back(std::move(*p));
      }
      result.push_back(std::move(o));
    }
  }
  return result;
}

ReportFocus FocusOnRank(const std::vector<ReportRankSummary>& ranks, uint32_t rank,
                        const WatchResult* watch, const CompareResult* compare) {
  if (watch) {
    for (const WatchHit& h : FirstHitPerRank(*watch)) {
      if (h.rank == rank && h.iteration >= 0) return {rank, h.iteration};
    }
  }
  if (compare) {
    const int64_t first = report_internal::FirstFailingInRank(*compare, rank);
    if (first >= 0) return {rank, compare->kernels[first].iteration};
  }
  const ReportRankSummary* r = FindSummary(ranks, rank);
  return {rank, r ? r->last_iteration : 0};
}

void KeepReportHits(WatchResult part, WatchResult* kept) {
  std::vector<WatchHit> hits = std::move(kept->hits);
  std::move(part.hits.begin(), part.hits.end(), std::back_inserter(hits));
  // The parts hold different ranks, and hits of different ranks never tie: the order is the
  // same whichever part came first.
  SortHitsByOccurrence(&hits);
  std::set<uint32_t> seen;
  kept->hits.clear();
  for (size_t i = 0; i < hits.size(); ++i) {
    const bool first_of_rank = seen.insert(hits[i].rank).second;
    if (i < kReportHitsShown || first_of_rank) {
      kept->hits.push_back(std::move(hits[i]));
    } else {
      ++kept->dropped_hits;
    }
  }
  for (const auto& [at, count] : part.hit_counts) kept->hit_counts[at] += count;
  kept->dropped_hits += part.dropped_hits;
  kept->tensors_checked += part.tensors_checked;
  kept->weight_pairs_checked += part.weight_pairs_checked;
  for (const auto& [check, n] : part.judged) kept->judged[check] += n;
  kept->ranks += part.ranks;
  std::move(part.skipped.begin(), part.skipped.end(), std::back_inserter(kept->skipped));
}

Status CollectReportCharts(const std::string& dir, const std::vector<ReportRankSummary>& ranks,
                           SeriesSelection selection, const std::vector<WatchCheck>& checks,
                           int threads, std::optional<uint32_t> rank, ReportInput* input) {
  input->ranks.clear();
  for (const ReportRankSummary& r : ranks) input->ranks.push_back(r.rank);
  if (rank && std::none_of(input->ranks.begin(), input->ranks.end(),
                           [&](const ReportRank& r) { return r.rank == *rank; })) {
    std::string found;
    for (const ReportRank& r : input->ranks) {
      found += (found.empty() ? "" : ", ") + std::to_string(r.rank);
    }
    return Status::InvalidArgument("--rank " + std::to_string(*rank) +
                                   ": the dump holds no such rank (ranks: " + found + ")");
  }
  const CompareResult* compare = input->compare ? &input->compare->shown : nullptr;
  const ReportFocus focus = rank ? FocusOnRank(ranks, *rank, input->watch, compare)
                                 : ChooseReportFocus(ranks, input->watch, compare);
  input->rank = focus.rank;
  input->rank_hits.clear();
  input->iterations = 0;
  for (const ReportRank& r : input->ranks) {
    if (r.rank == focus.rank) input->iterations = r.iterations.size();
  }
  input->order.clear();
  input->series.clear();
  if (ranks.empty()) return Status::Ok();
  // The charts show one rank: it alone is indexed again (and its hits found again).
  IndexFilter only;
  only.ranks = std::set<uint32_t>{focus.rank};
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpIndex index, IndexDump(dir, only));
  if (input->watch) {
    WatchOptions every;
    every.threads = threads;
    every.progress = false;
    input->rank_hits = RunWatch(index, checks, every).hits;
    for (const WatchHit& h : input->rank_hits) selection.preferred.push_back(h.kernel);
  }
  if (compare) {
    if (std::optional<std::string> first = FirstFailingKernel(*compare)) {
      selection.preferred.push_back(*first);
    }
  }
  input->order = CollectOrderSeries(index, focus, threads);
  input->series = CollectKernelSeries(index, focus.rank, selection);
  return Status::Ok();
}

}  // namespace graphdump::analysis
