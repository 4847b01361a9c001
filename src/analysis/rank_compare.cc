// Cross-rank compare: each rank's synced kernels against the first rank's, via CompareDumps.
#include "graphdump/analysis/rank_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "compare_json.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The rank-synced part of one rank, as a one-rank index CompareDumps can pair (`r` is moved in
// where its index is not used after).
DumpIndex SyncedPart(const DumpIndex& index, RankEntry r) {
  DumpIndex out;
  out.root = index.root;
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

// The order MergeRankComparisons lists kernels in (the rank aside).
auto MergeKey(const KernelComparison& k) {
  return std::make_tuple(k.graph_id, k.iteration < 0, k.iteration, k.order, k.rank);
}

// Keeps the first `keep` kernels of `part` that do not pass (in MergeKey's order) and its first
// failure, and the first `keep` unpaired kernels; counts what is dropped. A kept kernel's
// error_origin follows its origin to its new place, or is -1 when the origin was not kept.
void KeepShown(size_t keep, CompareResult* part, size_t* dropped_kernels,
               size_t* dropped_unpaired) {
  SortByMergeKey(&part->kernels);
  std::vector<KernelComparison> kept;
  std::vector<int64_t> kept_at(part->kernels.size(), -1);
  bool failure_kept = false;
  for (size_t i = 0; i < part->kernels.size(); ++i) {
    KernelComparison& k = part->kernels[i];
    if (k.verdict == Verdict::kPass) continue;
    const bool first_failure = k.verdict == Verdict::kError && !failure_kept;
    if (kept.size() >= keep && !first_failure) continue;
    failure_kept = failure_kept || k.verdict == Verdict::kError;
    kept_at[i] = static_cast<int64_t>(kept.size());
    kept.push_back(std::move(k));
  }
  for (KernelComparison& k : kept) {
    if (k.error_origin >= 0) k.error_origin = kept_at[static_cast<size_t>(k.error_origin)];
  }
  *dropped_kernels += part->kernels.size() - kept.size();
  part->kernels = std::move(kept);
  part->first_failure = -1;  // MergeRankComparisons finds it again
  if (part->unpaired.size() > keep) {
    *dropped_unpaired += part->unpaired.size() - keep;
    part->unpaired.resize(keep);
  }
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

StatusOr<std::vector<uint32_t>> RanksToCompare(const std::vector<uint32_t>& available,
                                               const std::vector<uint32_t>& requested,
                                               const std::string& root) {
  auto list = [&] {
    std::string s;
    for (uint32_t r : available) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s.empty() ? std::string("none") : s;
  };
  std::vector<uint32_t> ranks;
  if (requested.empty()) {
    ranks = available;
  } else {
    for (uint32_t id : requested) {
      if (std::find(available.begin(), available.end(), id) == available.end()) {
        return Status::InvalidArgument("--ranks: rank " + std::to_string(id) + " is not in " +
                                       root + " (ranks found: " + list() + ")");
      }
      if (std::find(ranks.begin(), ranks.end(), id) == ranks.end()) ranks.push_back(id);
    }
  }
  if (ranks.size() < 2) {
    return Status::InvalidArgument("cross-rank compare needs at least two ranks; " + root +
                                   " has rank_{id} directories for: " + list());
  }
  return ranks;
}

CompareResult CompareRankPair(const DumpIndex& index, const RankEntry& rank,
                              const DumpIndex& reference_index, const RankEntry& reference,
                              const CompareOptions& options) {
  return CompareDumps(SyncedPart(index, rank), SyncedPart(reference_index, reference), options);
}

void SortByMergeKey(std::vector<KernelComparison>* kernels) {
  std::vector<size_t> order(kernels->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return MergeKey((*kernels)[x]) < MergeKey((*kernels)[y]);
  });
  std::vector<int64_t> moved_to(order.size());
  std::vector<KernelComparison> sorted;
  sorted.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    moved_to[order[i]] = static_cast<int64_t>(i);
    sorted.push_back(std::move((*kernels)[order[i]]));
  }
  for (KernelComparison& k : sorted) {
    if (k.error_origin >= 0) k.error_origin = moved_to[k.error_origin];
  }
  *kernels = std::move(sorted);
}

RankCompareResult MergeRankComparisons(uint32_t reference, std::vector<uint32_t> compared,
                                       std::vector<Skipped> skipped,
                                       std::vector<CompareResult> parts) {
  RankCompareResult out;
  out.reference_rank = reference;
  out.compared_ranks = std::move(compared);
  CompareResult& merged = out.result;
  merged.skipped = std::move(skipped);
  for (CompareResult& r : parts) {
    const int64_t offset = static_cast<int64_t>(merged.kernels.size());
    for (KernelComparison& k : r.kernels) {
      if (k.error_origin >= 0) k.error_origin += offset;  // a kernel of the same part
      merged.kernels.push_back(std::move(k));
    }
    for (UnpairedKernel& u : r.unpaired) merged.unpaired.push_back(std::move(u));
    for (Skipped& s : r.skipped) merged.skipped.push_back(std::move(s));
    merged.passed += r.passed;
    merged.warnings += r.warnings;
    merged.errors += r.errors;
  }
  SortByMergeKey(&merged.kernels);
  for (size_t i = 0; i < merged.kernels.size(); ++i) {
    if (merged.kernels[i].verdict == Verdict::kError) {
      merged.first_failure = static_cast<int64_t>(i);
      break;
    }
  }
  return out;
}

StatusOr<RankCompareResult> CompareRanks(const DumpIndex& index,
                                         const RankCompareOptions& options) {
  std::vector<uint32_t> available;
  for (const RankEntry& r : index.ranks) available.push_back(r.rank);
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                             RanksToCompare(available, options.ranks, index.root));
  auto entry = [&](uint32_t id) {
    return &*std::find_if(index.ranks.begin(), index.ranks.end(),
                          [&](const RankEntry& r) { return r.rank == id; });
  };
  const RankEntry* reference = entry(ids[0]);
  // One progress line over the ranks (each rank's own pass draws none).
  Progress progress(options.compare.progress ? "compare --ranks: ranks" : "", ids.size() - 1);
  CompareOptions each = options.compare;
  each.progress = false;
  std::vector<CompareResult> parts;
  for (size_t i = 1; i < ids.size(); ++i) {
    parts.push_back(CompareRankPair(index, *entry(ids[i]), index, *reference, each));
    progress.Update(i);
  }
  return MergeRankComparisons(ids[0], {ids.begin() + 1, ids.end()}, index.skipped,
                              std::move(parts));
}

StatusOr<RankCompareResult> CompareRanksInDump(
    const std::string& dir, const RankCompareOptions& options, std::vector<std::string>* warnings,
    const std::function<void(size_t, CompareResult&)>& each_part) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks listed, ListDumpRanks(dir));
  std::vector<uint32_t> available;
  for (size_t i = 0; i < listed.size(); ++i) available.push_back(listed.rank(i));
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                             RanksToCompare(available, options.ranks, dir));
  const int threads =
      options.compare.threads > 0 ? options.compare.threads : DefaultThreads();
  // The reference rank's synced kernels stay in memory; every other rank is indexed, compared
  // and dropped, `outer` ranks at a time.
  IndexFilter only_reference;
  only_reference.ranks = std::set<uint32_t>{ids[0]};
  DumpIndex reference;
  GRAPHDUMP_ASSIGN_OR_RETURN(
      StreamedDump first,
      ForEachRank(listed, only_reference, 1, "", [&](size_t, DumpIndex& one) {
        if (reference.ranks.empty()) reference = SyncedPart(one, std::move(one.ranks.front()));
      }));
  IndexFilter others;
  others.ranks.emplace(ids.begin() + 1, ids.end());
  std::map<uint32_t, size_t> part_of;  // rank id -> its place among the compared ranks
  for (size_t i = 1; i < ids.size(); ++i) part_of[ids[i]] = i - 1;
  const int outer = static_cast<int>(std::clamp<size_t>(ids.size() - 1, 1, threads));
  CompareOptions each = options.compare;
  each.progress = false;
  each.threads = std::max(1, threads / outer);
  std::vector<CompareResult> parts(ids.size() - 1);
  std::vector<std::pair<size_t, size_t>> dropped(parts.size());  // kernels, unpaired
  GRAPHDUMP_ASSIGN_OR_RETURN(
      StreamedDump rest,
      ForEachRank(
          std::move(listed), others, outer,
          options.compare.progress ? "compare --ranks: ranks" : "", [&](size_t, DumpIndex& one) {
            const size_t i = part_of.at(one.ranks.front().rank);
            parts[i] =
                CompareDumps(SyncedPart(one, std::move(one.ranks.front())), reference, each);
            if (each_part) each_part(i, parts[i]);
            if (options.keep_shown > 0) {
              KeepShown(options.keep_shown, &parts[i], &dropped[i].first, &dropped[i].second);
            }
          }));
  std::vector<Skipped> skipped = std::move(first.skipped);
  for (Skipped& s : rest.skipped) skipped.push_back(std::move(s));
  *warnings = std::move(first.warnings);
  for (std::string& w : rest.warnings) warnings->push_back(std::move(w));
  RankCompareResult result = MergeRankComparisons(ids[0], {ids.begin() + 1, ids.end()},
                                                  std::move(skipped), std::move(parts));
  for (const auto& [kernels, unpaired] : dropped) {
    result.dropped_kernels += kernels;
    result.dropped_unpaired += unpaired;
  }
  return result;
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

nlohmann::json FirstDisagreementJson(const KernelComparison& k, uint32_t reference_rank) {
  using nlohmann::json;
  const RankDifference d = DifferenceOf(k);
  json first = {{"rank", k.rank},          {"reference_rank", reference_rank},
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
  return first;
}

std::string RankCompareResultJson(const RankCompareResult& result) {
  using nlohmann::json;
  json j = json::parse(CompareResultJson(result.result));
  j["reference_rank"] = result.reference_rank;
  j["compared_ranks"] = result.compared_ranks;
  json first = nullptr;
  if (result.result.first_failure >= 0) {
    first = FirstDisagreementJson(result.result.kernels[result.result.first_failure],
                                  result.reference_rank);
  }
  j["first_disagreement"] = first;
  return internal::JsonText(j, 2);
}

}  // namespace graphdump::analysis
