// Cross-rank agreement within one multi-rank dump (docs/analysis.md, `compare --ranks`): the
// tensors data parallelism keeps identical on every rank (parameters, all-reduce outputs,
// optimizer outputs) compared between each rank and the first one, with the metrics and
// tolerances of graphdump compare.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {

// True for the kernels whose dumped values must agree across data-parallel ranks: Parameter.*
// files, kernels whose full name contains "AllReduce", and kernels under "Default/optimizer-".
bool IsRankSyncedKernel(const KernelEntry& kernel);

struct RankCompareOptions {
  CompareOptions compare;       // iteration, tolerances, threads, progress
  std::vector<uint32_t> ranks;  // ranks to check; empty: every rank in the dump
  // CompareRanksInDump keeps, of each rank, the first `keep_shown` kernels that do not pass (and
  // its first failure) and the first `keep_shown` unpaired kernels, and counts the rest
  // (RankCompareResult::dropped_*): memory then holds what the text shows, whatever the number
  // of ranks. 0: every kernel is kept (--json, --out).
  size_t keep_shown = 0;
};

struct RankCompareResult {
  uint32_t reference_rank = 0;           // the first checked rank; every other is compared to it
  std::vector<uint32_t> compared_ranks;  // the others, ascending
  // Kernels of all compared ranks: KernelComparison::rank is the compared rank (side A), the
  // reference is side B. Sorted by graph, iteration, execution order, then rank, so
  // `first_failure` is the earliest disagreement.
  CompareResult result;
  // Kernels and unpaired kernels not kept (RankCompareOptions::keep_shown): `result` counts
  // passed, warnings and errors over all of them, and the dump has result.kernels.size() +
  // dropped_kernels compared kernels.
  size_t dropped_kernels = 0, dropped_unpaired = 0;
};

// Compares the rank-synced kernels (outputs only for all-reduce and optimizer kernels) of every
// rank in `options.ranks` against the first one. Errors: kInvalidArgument when fewer than two
// ranks are available or a requested rank is not in the dump (naming it and listing those found).
StatusOr<RankCompareResult> CompareRanks(const DumpIndex& index, const RankCompareOptions& options);

// The ranks CompareRanks compares, the reference first: `requested` without repeats, or every
// one of `available` (ascending) when it is empty. Errors are CompareRanks' (naming `root`).
StatusOr<std::vector<uint32_t>> RanksToCompare(const std::vector<uint32_t>& available,
                                               const std::vector<uint32_t>& requested,
                                               const std::string& root);

// One rank's rank-synced kernels against the reference rank's (each taken from an index that
// holds it), through CompareDumps: CompareRanks' comparison of one rank.
CompareResult CompareRankPair(const DumpIndex& index, const RankEntry& rank,
                              const DumpIndex& reference_index, const RankEntry& reference,
                              const CompareOptions& options);

// CompareRanks' result from its parts: the comparison of each rank of `compared` (CompareRankPair,
// `parts` in the same order) and the files the index skipped, listed first.
RankCompareResult MergeRankComparisons(uint32_t reference, std::vector<uint32_t> compared,
                                       std::vector<Skipped> skipped,
                                       std::vector<CompareResult> parts);

// CompareRanks over the dump `dir` indexed one rank at a time (ForEachRank): memory holds the
// reference rank's synced kernels, the ranks being compared and the result, not the whole
// index. `warnings` receives the index's warnings. Errors are IndexDump's and CompareRanks'.
// `each_part(position, part)`, when given, gets each rank's comparison (its place among the
// compared ranks, ascending rank ids but the reference) on the thread that made it, before
// keep_shown drops from it; what it leaves in part.kernels and part.unpaired is merged.
StatusOr<RankCompareResult> CompareRanksInDump(
    const std::string& dir, const RankCompareOptions& options, std::vector<std::string>* warnings,
    const std::function<void(size_t, CompareResult&)>& each_part = {});

// The result of CompareRanksInDump (keep_shown aside) as RankCompareResultJson prints it and
// its CSV (CompareResultCsv), without holding it: each rank's kernels are spilled to temporary
// files as JSON text and CSV rows, in the order of MergeRankComparisons' sort, and merged across
// ranks while written; its unpaired kernels are spilled in order. Memory holds each rank's
// first failure, the counts and the skipped files. The first failure's "error_origin" and
// "float32_chain" name kernels of its own rank's comparison.
class SpilledRankCompare {
 public:
  // `json`, `csv`: what to spill. With only `csv`, `options.keep_shown` still applies to
  // result() (the text). Errors are CompareRanksInDump's and the temporary files'.
  static StatusOr<std::unique_ptr<SpilledRankCompare>> Run(const std::string& dir,
                                                           const RankCompareOptions& options,
                                                           bool json, bool csv,
                                                           std::vector<std::string>* warnings);
  ~SpilledRankCompare();
  // CompareRanksInDump's result: without `json` as keep_shown leaves it; with `json`, the
  // counts, ranks and skipped files, no kernel (kernels() and unpaired() count them).
  const RankCompareResult& result() const { return result_; }
  size_t kernels() const;
  size_t unpaired() const;
  // RankCompareResultJson's text (no newline after it), in pieces, to `write`. With `json`.
  Status WriteJson(const std::function<Status(std::string_view)>& write) const;
  // CompareResultCsv's bytes to `path` through a temporary name (no file unless all of it was
  // written). With `csv`.
  Status WriteCsv(const std::string& path) const;

 private:
  struct Spill;
  SpilledRankCompare();
  std::unique_ptr<Spill> spill_;
  RankCompareResult result_;
};

// What differs in a kernel that disagrees and by how much. Tensors compared element by element:
// the largest max abs error of any of them. Tensors dumped as statistics only: the statistic of
// the first failing tensor outside the standard by the most, with both ranks' values.
struct RankDifference {
  bool statistics_only = false;
  bool is_input = false;
  uint32_t slot = 0;
  double max_abs_err = 0;             // element by element
  std::string statistic;              // statistics only: "Max Value"
  double value = 0, reference = 0;    // statistics only: the compared and the reference rank's
  // "max abs err 0.25"; "Max Value 1.501 vs 1.5 (by 0.001; output 0, statistics only)".
  std::string text;
};
RankDifference DifferenceOf(const KernelComparison& kernel);

// RankCompareResult as JSON: CompareResultJson's object plus "reference_rank",
// "compared_ranks" and "first_disagreement" (null when the ranks agree): the first failure's
// rank, iteration, kernel, io, slot and RankDifference ("statistic", "value",
// "reference_value", "abs_diff" for statistics only, "max_abs_err" otherwise, and "text").
std::string RankCompareResultJson(const RankCompareResult& result);

}  // namespace graphdump::analysis
