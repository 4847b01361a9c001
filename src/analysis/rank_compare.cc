// Cross-rank compare: each rank's synced kernels against the first rank's, via CompareDumps.
#include "graphdump/analysis/rank_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "graphdump/analysis/parallel.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The rank-synced part of one rank, as a one-rank index CompareDumps can pair.
DumpIndex SyncedPart(const DumpIndex& index, const RankEntry& rank) {
  DumpIndex out;
  out.root = index.root;
  RankEntry r = rank;
  for (GraphEntry& g : r.graphs) {
    for (IterationEntry& it : g.iterations) {
      std::vector<KernelEntry> kept;
      for (KernelEntry& k : it.kernels) {
        if (!IsRankSyncedKernel(k)) continue;
        if (!k.is_parameter) {
          std::erase_if(k.tensors, [](const TensorEntry& t) { return t.is_input; });
        }
        if (!k.tensors.empty()) kept.push_back(std::move(k));
      }
      it.kernels = std::move(kept);
    }
  }
  out.ranks.push_back(std::move(r));
  return out;
}

}  // namespace

bool IsRankSyncedKernel(const KernelEntry& kernel) {
  if (kernel.is_parameter) return true;
  for (const std::string* name : {&kernel.full_name, &kernel.op_name}) {
    if (Contains(*name, "AllReduce")) return true;
    if (name->rfind("Default/optimizer-", 0) == 0 || name->rfind("Default_optimizer-", 0) == 0) {
      return true;
    }
  }
  return false;
}

namespace {

// Adds one compared rank's result to `merged` (ranks in the order they were asked for).
void AddRankResult(CompareResult r, CompareResult* merged) {
  for (KernelComparison& k : r.kernels) merged->kernels.push_back(std::move(k));
  for (UnpairedKernel& u : r.unpaired) merged->unpaired.push_back(std::move(u));
  for (Skipped& s : r.skipped) merged->skipped.push_back(std::move(s));
  merged->passed += r.passed;
  merged->warnings += r.warnings;
  merged->errors += r.errors;
}

// Sorts the merged kernels (graph, iteration, execution order, rank) and finds the first failure.
void FinishRanks(CompareResult* merged) {
  std::stable_sort(merged->kernels.begin(), merged->kernels.end(),
                   [](const KernelComparison& x, const KernelComparison& y) {
                     auto key = [](const KernelComparison& k) {
                       return std::make_tuple(k.graph_id, k.iteration < 0, k.iteration, k.order,
                                              k.rank);
                     };
                     return key(x) < key(y);
                   });
  for (size_t i = 0; i < merged->kernels.size(); ++i) {
    if (merged->kernels[i].verdict == Verdict::kError) {
      merged->first_failure = static_cast<int64_t>(i);
      break;
    }
  }
}

// "0, 1, 2" of `ids`; "none".
std::string IdList(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s.empty() ? "none" : s;
}

// The positions of the ranks to check among `ids` (the first is the reference). Errors as
// CompareRanks'.
StatusOr<std::vector<size_t>> ChosenRanks(const std::vector<uint32_t>& ids,
                                          const std::string& root,
                                          const RankCompareOptions& options) {
  std::vector<size_t> chosen;
  if (options.ranks.empty()) {
    for (size_t i = 0; i < ids.size(); ++i) chosen.push_back(i);
  } else {
    for (uint32_t id : options.ranks) {
      auto it = std::find(ids.begin(), ids.end(), id);
      if (it == ids.end()) {
        return Status::InvalidArgument("--ranks: rank " + std::to_string(id) + " is not in " +
                                       root + " (ranks found: " + IdList(ids) + ")");
      }
      const size_t position = static_cast<size_t>(it - ids.begin());
      if (std::find(chosen.begin(), chosen.end(), position) == chosen.end()) {
        chosen.push_back(position);
      }
    }
  }
  if (chosen.size() < 2) {
    return Status::InvalidArgument("cross-rank compare needs at least two ranks; " + root +
                                   " has rank_{id} directories for: " + IdList(ids));
  }
  return chosen;
}

}  // namespace

StatusOr<RankCompareResult> CompareRanks(const DumpIndex& index,
                                         const RankCompareOptions& options) {
  std::vector<uint32_t> ids;
  for (const RankEntry& r : index.ranks) ids.push_back(r.rank);
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> chosen, ChosenRanks(ids, index.root, options));
  RankCompareResult out;
  out.reference_rank = ids[chosen[0]];
  CompareResult& merged = out.result;
  merged.skipped = index.skipped;
  const DumpIndex reference = SyncedPart(index, index.ranks[chosen[0]]);
  // One progress line over the ranks (each rank's own pass draws none).
  Progress progress(options.compare.progress ? "compare --ranks: ranks" : "", chosen.size() - 1);
  CompareOptions each = options.compare;
  each.progress = false;
  for (size_t i = 1; i < chosen.size(); ++i) {
    out.compared_ranks.push_back(ids[chosen[i]]);
    AddRankResult(CompareDumps(SyncedPart(index, index.ranks[chosen[i]]), reference, each),
                  &merged);
    progress.Update(i);
  }
  FinishRanks(&merged);
  return out;
}

StatusOr<RankCompareResult> CompareRanksInDump(const std::string& dir,
                                               const RankCompareOptions& options,
                                               std::vector<std::string>* warnings) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks listed, ListDumpRanks(dir));
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < listed.size(); ++i) ids.push_back(listed.rank(i));
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> chosen, ChosenRanks(ids, dir, options));
  const int threads =
      options.compare.threads > 0 ? options.compare.threads : DefaultThreads();
  RankCompareResult out;
  out.reference_rank = ids[chosen[0]];
  // The reference rank's synced kernels stay in memory; every other rank is indexed, compared
  // and dropped, `outer` ranks at a time.
  IndexFilter only_reference;
  only_reference.ranks = std::set<uint32_t>{out.reference_rank};
  DumpIndex reference;
  StreamedDump first = ForEachRank(listed, only_reference, 1, "", [&](size_t, DumpIndex& one) {
    if (reference.ranks.empty()) reference = SyncedPart(one, one.ranks.front());
  });
  IndexFilter others;
  others.ranks.emplace();
  std::vector<size_t> slot_of(ids.size(), SIZE_MAX);  // position -> place among the compared
  for (size_t i = 1; i < chosen.size(); ++i) {
    others.ranks->insert(ids[chosen[i]]);
    slot_of[chosen[i]] = i - 1;
    out.compared_ranks.push_back(ids[chosen[i]]);
  }
  const int outer = static_cast<int>(std::clamp<size_t>(chosen.size() - 1, 1, threads));
  CompareOptions each = options.compare;
  each.progress = false;
  each.threads = std::max(1, threads / outer);
  std::vector<CompareResult> results(chosen.size() - 1);
  StreamedDump rest = ForEachRank(
      std::move(listed), others, outer,
      options.compare.progress ? "compare --ranks: ranks" : "", [&](size_t i, DumpIndex& one) {
        if (slot_of[i] == SIZE_MAX) return;  // the reference's id given twice
        results[slot_of[i]] = CompareDumps(SyncedPart(one, one.ranks.front()), reference, each);
      });
  CompareResult& merged = out.result;
  merged.skipped = std::move(first.skipped);
  for (Skipped& s : rest.skipped) merged.skipped.push_back(std::move(s));
  for (CompareResult& r : results) AddRankResult(std::move(r), &merged);
  FinishRanks(&merged);
  *warnings = std::move(first.warnings);
  for (std::string& w : rest.warnings) warnings->push_back(std::move(w));
  return out;
}

RankDifference DifferenceOf(const KernelComparison& kernel) {
  RankDifference d;
  for (const TensorComparison& t : kernel.tensors) {
    if (t.mode == "statistic" && t.verdict == Verdict::kError && !t.worst_statistic.empty()) {
      d.statistics_only = true;
      d.is_input = t.is_input;
      d.slot = t.slot;
      d.statistic = t.worst_statistic;
      d.value = t.worst_statistic_a;
      d.reference = t.worst_statistic_b;
      d.text = fmt::format("{} {:.6g} vs {:.6g} (by {:.6g}; {} {}, statistics only)", d.statistic,
                           d.value, d.reference, std::fabs(d.value - d.reference),
                           d.is_input ? "input" : "output", d.slot);
      return d;
    }
  }
  for (const TensorComparison& t : kernel.tensors) {
    if (t.mode == "tensor") d.max_abs_err = std::max(d.max_abs_err, t.metrics.max_abs_err);
  }
  d.text = fmt::format("max abs err {:.6g}", d.max_abs_err);
  return d;
}

std::string RankCompareResultJson(const RankCompareResult& result) {
  using nlohmann::json;
  json j = json::parse(CompareResultJson(result.result));
  j["reference_rank"] = result.reference_rank;
  j["compared_ranks"] = result.compared_ranks;
  json first = nullptr;
  if (result.result.first_failure >= 0) {
    const KernelComparison& k = result.result.kernels[result.result.first_failure];
    const RankDifference d = DifferenceOf(k);
    first = {{"rank", k.rank},          {"reference_rank", result.reference_rank},
             {"iteration", k.iteration}, {"call", k.call},
             {"kernel", k.name_a},      {"text", d.text}};
    if (d.statistics_only) {
      // JSON has no NaN or infinity: those values are written as text.
      auto number = [](double v) { return std::isfinite(v) ? json(v) : json(fmt::format("{}", v)); };
      first["io"] = d.is_input ? "input" : "output";
      first["slot"] = d.slot;
      first["statistic"] = d.statistic;
      first["value"] = number(d.value);
      first["reference_value"] = number(d.reference);
      first["abs_diff"] = number(std::fabs(d.value - d.reference));
    } else {
      first["max_abs_err"] = d.max_abs_err;
    }
  }
  j["first_disagreement"] = first;
  return internal::JsonText(j, 2);
}

}  // namespace graphdump::analysis
