// A self-contained HTML report over a dump or a comparison: charts drawn in the page by d3.js
// (inlined with the data into the file: no network fetch), then collapsible tables.
// docs/analysis.md describes the page.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/report_compare.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::analysis {

// Statistics of one kernel's output 0 at one iteration, as statistic.csv gives them: max, min,
// mean and l2norm are NaN when any element is NaN and +-inf when an infinity decides them; a
// statistic the dump does not hold (a statistic.csv without that column) is nullopt.
struct StatPoint {
  std::string kernel;  // full name
  int64_t iteration = 0;
  uint32_t call = 0;   // which call of the kernel in the iteration (docs/analysis.md)
  uint32_t calls = 1;  // the kernel's calls in the iteration
  std::optional<double> max, min, mean, l2norm;
  int64_t elements = -1;                                           // -1: unknown
  int64_t nan_count = -1, pos_inf_count = -1, neg_inf_count = -1;  // -1: unknown
};

// Where the report looks in a dump with several ranks or graphs.
struct ReportFocus {
  uint32_t rank = 0;
  int64_t iteration = 0;  // the iteration the along-the-order charts show
};

// A rank of the dump, as the page's rank selector and rank-by-iteration overview list it.
struct ReportRank {
  uint32_t rank = 0;
  std::vector<int64_t> iterations;  // ascending; constants (-1) left out
};

// What the report keeps of a rank while the dump is read one rank at a time: its entry in the
// rank selector, and the iteration its charts show when nothing was found in it (the last of
// its first graph holding iterations; 0 when none).
struct ReportRankSummary {
  ReportRank rank;
  int64_t last_iteration = 0;
};
ReportRankSummary SummarizeReportRank(const RankEntry& rank);

// The rank and iteration the charts show: those of the first watchpoint hit, else of the first
// failing computed kernel of `compare` (never a parameter or constant), else rank 0 (the first
// rank when there is none) and its last iteration. `ranks`: every rank of the dump, in order.
ReportFocus ChooseReportFocus(const std::vector<ReportRankSummary>& ranks,
                              const WatchResult* watch, const CompareResult* compare);
// The same over an index (its ranks summarized). REQUIRES: `index` holds at least one rank.
ReportFocus ChooseReportFocus(const DumpIndex& index, const WatchResult* watch,
                              const CompareResult* compare);

// The full name of the first failing kernel of `compare` in execution order that is computed by
// the graph (parameters, constants and graph inputs, op type "Parameter", are skipped), or
// nullopt. Its index in `compare.kernels` goes to `*position` when non-null.
std::optional<std::string> FirstFailingKernel(const CompareResult& compare,
                                              int64_t* position = nullptr);

// One kernel's output-0 statistics across the iterations of one rank.
struct KernelSeries {
  std::string kernel;
  std::vector<StatPoint> points;  // ascending iteration
};

// Which kernels to follow across iterations: with a non-empty `filter`, up to `limit` kernels
// whose full name contains it (execution order); else the kernels named in `preferred` (the ones
// that hit, the first divergence) that the dump holds, up to `limit`; else the first `limit`
// computed kernels in execution order.
struct SeriesSelection {
  std::string filter;
  std::vector<std::string> preferred;
  size_t limit = 6;
};

// The selected kernels' statistics in rank `rank` (from statistic.csv where it holds max, min,
// mean or l2norm, else computed from the .npy file). Unreadable files are left out of the points.
std::vector<KernelSeries> CollectKernelSeries(const DumpIndex& index, uint32_t rank,
                                              const SeriesSelection& selection);

// Output-0 statistics of every computed kernel of one graph at one iteration, in execution order.
struct OrderSeries {
  uint32_t rank = 0, graph_id = 0;
  int64_t iteration = 0;
  std::vector<StatPoint> points;
};

// One OrderSeries per graph of `focus.rank` that holds `focus.iteration`. Files are read on
// `threads` threads (0: DefaultThreads()).
std::vector<OrderSeries> CollectOrderSeries(const DumpIndex& index, const ReportFocus& focus,
                                            int threads);

// A replay of one kernel of a comparison (`report --compare A B --replay N`; docs/precision.md,
// "Replay"), shown on the attribution chart and in the table of kernels adding error.
struct ReplayNote {
  int64_t kernel = -1;  // index into ReportComparison::shown.kernels
  std::string verdict;  // "inaccurate", "ill-conditioned", "inherits", "accurate", "not replayable"
  std::string words;    // what follows the verdict in the replay's words (" at bfloat16: ...")
};

// The hits the page lists (the table of hits); the dump's first hit is the first of them.
inline constexpr size_t kReportHitsShown = 500;

// Adds `part`, RunWatch's result over one or more ranks not yet in `kept` with keep_hits
// kReportHitsShown, to `kept`: the hits of both in the order they occurred (WatchResult::hits),
// of which the first kReportHitsShown and each rank's first stay (the others counted in
// dropped_hits), hit_counts, dropped counts and checked tensors added, skipped files appended;
// intended infinities and spreads are dropped (the page shows neither). Parts may come in any
// order: the hits kept are the same.
void KeepReportHits(WatchResult part, WatchResult* kept);

struct ReportInput {
  std::string title;
  std::vector<ReportRank> ranks;  // every rank of the dump, ascending
  uint32_t rank = 0;              // the rank the charts show
  // Error metrics along the execution order (of `rank`: its kernels whole), the tables.
  const ReportComparison* compare = nullptr;
  // The hit count, first hits and the table of hits: `hits` may be the first kReportHitsShown
  // and each rank's first only (KeepReportHits), with dropped_hits and hit_counts (the rank
  // selector's and overview's counts) over every hit.
  const WatchResult* watch = nullptr;
  std::vector<WatchHit> rank_hits;  // with `watch`: every hit of `rank`, in order (markers)
  std::vector<ReplayNote> replays;  // of kernels of `compare->shown`, may be empty
  std::vector<OrderSeries> order;          // statistics along the execution order
  std::vector<KernelSeries> series;        // statistics across iterations
  size_t iterations = 0;  // iterations the dump holds (1: no across-iteration plots)
  // What the reader should know about the dumps (the index's warnings: a rank marked
  // incomplete, a directory holding two runs), shown at the top.
  std::vector<std::string> notes;
};

// The focus within one rank: its first hit's iteration, else its first failing computed kernel's,
// else its last iteration (ReportRankSummary::last_iteration).
ReportFocus FocusOnRank(const std::vector<ReportRankSummary>& ranks, uint32_t rank,
                        const WatchResult* watch, const CompareResult* compare);

// Fills `input->ranks`, `input->rank`, `input->order`, `input->series` and `input->iterations`
// for the dump `dir` (A of a comparison), of whose ranks `ranks` holds the summaries in rank
// order, and on which `input->watch` and `input->compare` (either may be null) were computed:
// the focus is ChooseReportFocus's, or FocusOnRank(`rank`) when given; when `selection.filter`
// is empty, the kernels that hit in the focus rank and the first failing kernel are added to
// `selection.preferred`. Only the focus rank is indexed again (alone) for its statistics, read
// on `threads` threads (0: DefaultThreads()), and, with `input->watch`, checked again against
// `checks` for `input->rank_hits`. Errors: kInvalidArgument when `rank` is not in the dump
// (listing those that are); IndexDump's.
Status CollectReportCharts(const std::string& dir, const std::vector<ReportRankSummary>& ranks,
                           SeriesSelection selection, const std::vector<WatchCheck>& checks,
                           int threads, std::optional<uint32_t> rank, ReportInput* input);

// The HTML text. A section "ranks" comes first: a rank selector (<select id="rank-selector">,
// one <option value="{rank}"> per rank of `input.ranks`, with its hits and failing kernels) and
// a rank-by-iteration overview of where the hits and failures are; the charts show one rank
// (`input.rank`). Every chart is downsampled to what its width shows: per pixel column, the
// lowest and highest value of each series and its first NaN, +Inf and -Inf, with the marked
// points (first hit, first divergence) kept exactly where they are; the charts' data fit in
// kReportChartBytes (fewer columns when needed), so a page stays under 5 MB whatever the dump.
// Charts come first (drawn from a JSON block by the inlined script), tables after
// in <details> elements. In the drawn page every chart is an <svg class="plot">; a NaN, +Inf or
// -Inf value is a <path class="nonfinite nan|pos-inf|neg-inf"> whose data-kernel attribute holds
// the kernel's full name; the first failing computed kernel of a comparison is marked by an
// element of class "first-divergence" (id "first-divergence" on the first chart) with
// data-kernel set. A comparison also gets the attribution chart (id "compare-attribution": the
// norm rel err of each kernel's inputs and of its outputs), where each of the first
// kKernelsAddingErrorMarked contributors is an element of class "adds-error" (data-kernel set,
// its label "#rank adds error xgrowth" and the replay verdict when `replays` holds one), and a
// table of every contributor (id "adding-error-table").
inline constexpr size_t kKernelsAddingErrorMarked = 5;
inline constexpr size_t kReportChartBytes = 3'500'000;
std::string RenderReportHtml(const ReportInput& input);

}  // namespace graphdump::analysis
