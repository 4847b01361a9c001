// What `graphdump report --compare A B` shows of a comparison, kept while the rank pairs are
// compared one at a time (CompareDumpDirs' each_part): memory holds what the page shows and
// counts of the rest, not every kernel's comparison (docs/scale.md, "Memory and speed at
// scale").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

// The rows each table of the page lists, and the kernels adding error whose float32 advice
// (PrecisionChainText) it prints.
inline constexpr size_t kReportRowsShown = 200;
inline constexpr size_t kReportChainsShown = 20;

struct ReportComparison {
  // The kernels the page names, in execution order, without tensors and source traces: the
  // first kReportRowsShown that did not pass, each rank's first failing computed kernel, the
  // first differing source, the first kReportRowsShown contributors and the replay candidates;
  // every kernel of the charted rank whole (AddChartedRank). Its indices (contributors: ranked,
  // the first kReportRowsShown with their contribution_rank, then the replay candidates;
  // differing_sources: the first) count within it; passed, warnings and errors count every
  // kernel; unpaired and skipped hold the first kReportRowsShown.
  CompareResult shown;
  std::vector<int64_t> positions;  // each shown kernel's index in the whole comparison
  size_t kernels = 0, not_passed = 0, contributors = 0, unpaired = 0, skipped = 0;
  std::vector<std::string> chains;  // PrecisionChainText of the first kReportChainsShown
  // Failing computed kernels (verdict error, not a parameter or constant) by (rank, iteration).
  std::map<std::pair<uint32_t, int64_t>, int64_t> failing;
  std::map<uint32_t, int64_t> rank_offsets;  // where each rank's kernels start
};

// Takes the rank pairs' results (each summarized alone, as each_part gives them) in order.
class ReportCompareCollector {
 public:
  // `replays`: also keep the first `replays` distinct (rank, kernel) of the ranked contributors
  // (what ReplaySuspects replays).
  explicit ReportCompareCollector(size_t replays) : replays_(replays) {}
  void Add(CompareResult& part);  // `part` is left as it was
  // `index_skipped` (CompareDumpDirs' result's) come first among the skipped files.
  ReportComparison Finish(const std::vector<Skipped>& index_skipped);

 private:
  struct Contributor {
    ContributionKey key;  // its place in the ranking (CompareContribution)
    int64_t position;
    KernelComparison kernel;  // light
    std::string chain;        // for the first kReportChainsShown
  };
  size_t replays_;
  int64_t offset_ = 0;
  ReportComparison result_;
  std::map<int64_t, KernelComparison> kept_;  // by position
  std::vector<Contributor> top_;              // ranked, the first kReportRowsShown
  std::vector<Contributor> candidates_;       // ranked, distinct (rank, kernel), `replays_` at most
  std::vector<Skipped> part_skipped_;
  bool source_kept_ = false;
  int64_t source_position_ = -1;
  std::set<uint32_t> failing_ranks_;
};

// The comparison of a whole result (CompareDumps'), every kernel of `rank` whole.
ReportComparison ReportComparisonOf(const CompareResult& whole, uint32_t rank);

// The rank pair of A's rank `rank` compared alone, as CompareDumpDirs pairs it (B's rank of that
// id, else B's only rank): the part each_part gave for it. Errors: IndexDump's.
StatusOr<CompareResult> CompareRankPair(const std::string& a, const std::string& b, uint32_t rank,
                                        const CompareOptions& options);

// Puts every kernel of the charted rank's part (its rank pair compared again alone) whole into
// `c` (CompareSection draws them).
void AddChartedRank(const CompareResult& part, ReportComparison* c);

}  // namespace graphdump::analysis
