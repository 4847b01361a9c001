// Internal to the analysis library: the JSON objects of CompareResultJson, for the outputs that
// write them one at a time (compare --ranks --json, rank_compare_json.cc; compare A B --json,
// compare_spilled.cc).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/spilled_runs.h"

namespace graphdump::analysis {

// A kernel of "kernels"; `result` holds it (error_origin names a kernel of `result`).
nlohmann::json KernelComparisonJson(const CompareResult& result, const KernelComparison& k);
// "first_failure", "first_adding_error" and each contributor: `f` is a kernel of `result`.
nlohmann::json BriefKernelJson(const CompareResult& result, const KernelComparison& f);
// An element of "unpaired".
nlohmann::json UnpairedKernelJson(const UnpairedKernel& u);
// An element of "differing_sources" (`k` a parameter or constant) and of
// "differing_graph_inputs" (input `slot` of `k`).
nlohmann::json DifferingSourceJson(const KernelComparison& k);
nlohmann::json DifferingGraphInputJson(const KernelComparison& k, uint32_t slot);
// An element of "call_count_differences"; "skipped".
nlohmann::json CallCountDifferenceJson(const CallCountDifference& d);
nlohmann::json SkippedJson(const std::vector<Skipped>& skipped);
// Sorts `kernels` stably in MergeRankComparisons' order (graph, iteration, execution order,
// rank); each error_origin still names the kernel it named (rank_compare.cc).
void SortByMergeKey(std::vector<KernelComparison>* kernels);
// The per-tensor CSV (CompareCsvHeader, then the records of `rows` merged, each appended to the
// text by `append`) to `path` through a temporary name: no file unless all of it was written.
Status WriteCompareCsv(const std::string& path, const SpilledRuns& rows,
                       const std::function<void(std::string_view, std::string*)>& append);
// compare --ranks' "first_disagreement" for its first failure `k` (rank_compare.cc).
nlohmann::json FirstDisagreementJson(const KernelComparison& k, uint32_t reference_rank);

}  // namespace graphdump::analysis
