// Watchpoints over a dump directory (MindInsight's debugger conditions; docs/analysis.md,
// `graphdump watch`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/watch_checks.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

struct WatchHit {
  uint32_t rank = 0, graph_id = 0;
  int64_t iteration = 0;
  uint32_t call = 0;   // which call of the kernel in the iteration (docs/analysis.md)
  uint32_t calls = 1;  // the kernel's calls in the iteration
  // When the call ran (its earliest tensor timestamp); UINT64_MAX when the dump has none.
  uint64_t timestamp = UINT64_MAX;
  // The call's position among every kernel call of its rank and iteration (all graphs), in the
  // order they ran: by timestamp, else by graph, call and execution order. Call numbers count
  // per kernel, not across kernels, and clocks of different machines differ; ranks run the same
  // program, so the n-th call of one rank is the n-th of another (a collective that spreads a
  // NaN to every rank comes after the kernel that made it, on every rank): hits are ordered by
  // it across ranks.
  uint64_t sequence = 0;
  int64_t order = -1;
  std::string kernel;  // full name
  bool is_input = false;
  uint32_t slot = 0;
  std::string check;        // "nan", "large:10000"...
  std::string detail;       // "3 NaN of 120 elements; first at [5, 3], row 5 (1 of 8 rows)"
  // nan, inf, overflow and grad-explode hits on a tensor read from its file: the index of the
  // first NaN (or infinity) in the tensor's shape, and its row (the index of the first
  // dimension: the batch row of a batch-first tensor; -1 below two dimensions). Empty and -1
  // otherwise (a statistic-only tensor has no positions).
  std::vector<int64_t> first_index;
  int64_t row = -1;
  // first_index is known: a tensor read from its file (a 0-d tensor's position is the empty
  // index []); false for a statistic-only tensor, which has no positions.
  bool has_position = false;
  std::string source_line;  // "model.py:58", may be empty
  std::vector<SourceLocation> source_trace;  // every frame, innermost first (--json)
  std::string path;
};

struct WatchOptions {
  int threads = 0;  // 0: DefaultThreads()
  bool progress = true;
  // Count infinities a kernel writes on purpose (IntendedInfinity: masked_fill(mask, -inf)),
  // and the same tensor as a later kernel's input, as inf, overflow and large hits. Off: they
  // are listed in WatchResult::intended instead.
  bool count_intended_inf = false;
  // RunWatch and WatchDump keep the first `keep_hits` hits, each rank's first hit and the first
  // `keep_hits` intended infinities (in their order), count the rest (WatchResult::dropped_hits)
  // and keep each rank's HitSpread: a hit not kept is never made. 0: every hit is kept.
  size_t keep_hits = 0;
};

// What followed a rank's first hit on that rank (`watch --first`): the hits after it, the kernels
// they are in (other than the first hit's, in the order they were first hit) and the last
// iteration among them.
struct HitSpread {
  size_t later = 0;
  std::vector<std::string> kernels;  // the first `shown` of them (SpreadAfter)
  size_t kernel_count = 0;
  int64_t last_iteration = 0;
};

// The kernels a HitSpread names (`watch --first` prints them).
inline constexpr size_t kSpreadShown = 5;

// A HitSpread built hit by hit: constructed with a rank's first hit, given each later hit of the
// rank in the order they occurred. Holds views of the kernel names: they must outlive it.
class HitSpreadBuilder {
 public:
  HitSpreadBuilder(std::string_view first_kernel, int64_t first_iteration, size_t shown);
  void Add(std::string_view kernel, int64_t iteration);
  HitSpread Take() { return std::move(spread_); }

 private:
  std::unordered_set<std::string_view> seen_;  // kernels named so far
  size_t shown_;
  HitSpread spread_;
};

struct WatchResult {
  // In the order they occurred, across ranks: by iteration (constants last), sequence, inputs
  // before outputs, rank, graph and slot. hits[0] is the first hit of the dump.
  std::vector<WatchHit> hits;
  // Tensors whose only infinities are intended (not hits unless count_intended_inf), in the same
  // order; `check` is "inf" and `detail` says which kernel's argument wrote them.
  std::vector<WatchHit> intended;
  std::vector<Skipped> skipped;
  int64_t tensors_checked = 0;       // value checks (nan, inf, ...): tensors read
  int64_t weight_pairs_checked = 0;  // weight checks: a parameter against its previous dump
  // What each check judged, by its text (WatchCheck::text): tensors (TensorJudged), weight
  // pairs or losses. A check absent or at 0 had nothing to judge (NothingJudged).
  std::map<std::string, int64_t> judged;
  size_t ranks = 0;  // rank_{id} directories in the index
  // Hits and intended infinities not kept (WatchOptions::keep_hits): the dump has
  // hits.size() + dropped_hits hits.
  size_t dropped_hits = 0, dropped_intended = 0;
  // With keep_hits: each rank's HitSpread after its first hit (kSpreadShown kernels), by rank id.
  std::map<uint32_t, HitSpread> spreads;
  // Every hit, kept or not, counted by (rank, iteration) (RunWatch; MergeWatchResults and
  // WatchDump add them; EncodeWatchResult leaves them out): what `graphdump report` counts per
  // rank and iteration without holding the hits.
  std::map<std::pair<uint32_t, int64_t>, size_t> hit_counts;
};

// The checks of `judged` (WatchResult::judged) at 0, each with what it needs
// (WatchCheckInfo::needs): "grad-explode:1000 judged nothing: it needs a gradient ...".
std::vector<std::string> NothingJudged(const std::map<std::string, int64_t>& judged);

// The hits of `first`'s rank after `first` in `hits` (in the order they occurred), naming at most
// `shown` kernels.
HitSpread SpreadAfter(const std::vector<WatchHit>& hits, const WatchHit& first, size_t shown);

WatchResult RunWatch(const DumpIndex& index, const std::vector<WatchCheck>& checks,
                     const WatchOptions& options);

// A hit's place in the order hits occurred across ranks (WatchResult::hits): by iteration
// (constants last), sequence, inputs before outputs, rank, graph and slot.
inline auto OccurrenceKey(int64_t iteration, uint64_t sequence, bool is_input, uint32_t rank,
                          uint32_t graph_id, uint32_t slot) {
  return std::make_tuple(iteration < 0, iteration, sequence, !is_input, rank, graph_id, slot);
}

// Sorts hits in the order they occurred across ranks (WatchResult::hits); stable.
void SortHitsByOccurrence(std::vector<WatchHit>* hits);

// One result from the results of RunWatch over parts of a dump (an index of some of its ranks
// each), given in the order of their ranks: hits, intended infinities and skipped files in that
// order, counts added, hits then sorted by occurrence. Parts of one rank each, in rank order,
// give what RunWatch over the whole dump gives (the skipped files listed by rank).
WatchResult MergeWatchResults(std::vector<WatchResult> parts);

// RunWatch over the dump `dir` indexed one rank at a time (ForEachRank): memory holds the ranks
// being checked and the hits, not the whole index; the result is RunWatch's on IndexDump(dir).
// `warnings` receives the index's warnings. Errors are IndexDump's.
StatusOr<WatchResult> WatchDump(const std::string& dir, const std::vector<WatchCheck>& checks,
                                const WatchOptions& options, std::vector<std::string>* warnings);

// RunWatch over each rank of `ranks` indexed one at a time (ForEachRank, several ranks at once):
// `each(position, result)` gets the result of the rank at `position` in `ranks`, on the thread
// that checked it; its skipped files are those found while checking (the index's are the
// returned StreamedDump's). Errors are ForEachRank's.
StatusOr<StreamedDump> WatchEachRank(DumpRanks ranks, const std::vector<WatchCheck>& checks,
                                     const WatchOptions& options,
                                     const std::function<void(size_t, WatchResult&)>& each);

// The first hit of each rank, in the order of `result.hits`: the rank that hit first comes first.
std::vector<WatchHit> FirstHitPerRank(const WatchResult& result);

// The result as JSON: "first_hit" is hits[0], the first hit of any rank. With more than one rank
// in the index, "first_hit_per_rank" (FirstHitPerRank's order) and "first_rank" (null without
// hits) are added.
std::string WatchResultJson(const WatchResult& result);

// WatchDump's result (options.keep_hits aside: every hit) as WatchResultJson prints it, without
// holding it: each rank's hits and intended infinities are spilled to a temporary file as JSON
// text in the order they occurred (SpilledRuns), and merged across ranks by occurrence while
// the JSON is written. Memory holds each rank's first hit, the counts and the skipped files.
class SpilledWatch {
 public:
  // `warnings` receives the index's warnings. Errors are IndexDump's and the temporary file's.
  static StatusOr<std::unique_ptr<SpilledWatch>> Run(const std::string& dir,
                                                     const std::vector<WatchCheck>& checks,
                                                     const WatchOptions& options,
                                                     std::vector<std::string>* warnings);
  ~SpilledWatch();

  size_t hits() const;
  const std::vector<Skipped>& skipped() const { return skipped_; }
  const std::map<std::string, int64_t>& judged() const { return judged_; }
  // WatchResultJson's text (no newline after it), in pieces, in order, to `write`.
  Status WriteJson(const std::function<Status(std::string_view)>& write) const;

 private:
  struct Spill;
  SpilledWatch();
  std::unique_ptr<Spill> spill_;
  std::vector<Skipped> skipped_;
  std::map<std::string, int64_t> judged_;
};

}  // namespace graphdump::analysis
