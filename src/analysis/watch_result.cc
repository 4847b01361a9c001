// watch's result: the order of hits across ranks, watch over a whole dump rank by rank and
// merging the results of parts of a dump (watch.h; the JSON form is watch_json.cc's).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <tuple>

#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::analysis {
void SortHitsByOccurrence(std::vector<WatchHit>* hits) {
  std::stable_sort(hits->begin(), hits->end(), [](const WatchHit& a, const WatchHit& b) {
    auto key = [](const WatchHit& h) {
      return OccurrenceKey(h.iteration, h.sequence, h.is_input, h.rank, h.graph_id, h.slot);
    };
    return key(a) < key(b);
  });
}

std::vector<std::string> NothingJudged(const std::map<std::string, int64_t>& judged) {
  std::vector<std::string> out;
  for (const auto& [text, n] : judged) {
    if (n > 0) continue;
    auto parsed = ParseWatchChecks(text);
    if (!parsed.ok() || parsed->size() != 1) continue;
    out.push_back(fmt::format("{} judged nothing: it needs {}", text,
                              WatchCheckOf(parsed->front().kind).needs));
  }
  return out;
}

WatchResult MergeWatchResults(std::vector<WatchResult> parts) {
  WatchResult merged;
  for (WatchResult& p : parts) {
    std::move(p.hits.begin(), p.hits.end(), std::back_inserter(merged.hits));
    std::move(p.intended.begin(), p.intended.end(), std::back_inserter(merged.intended));
    std::move(p.skipped.begin(), p.skipped.end(), std::back_inserter(merged.skipped));
    merged.tensors_checked += p.tensors_checked;
    merged.weight_pairs_checked += p.weight_pairs_checked;
    for (const auto& [check, n] : p.judged) merged.judged[check] += n;
    merged.ranks += p.ranks;
    merged.dropped_hits += p.dropped_hits;
    merged.dropped_intended += p.dropped_intended;
    merged.spreads.merge(p.spreads);
    for (const auto& [at, count] : p.hit_counts) merged.hit_counts[at] += count;
  }
  SortHitsByOccurrence(&merged.hits);
  return merged;
}

StatusOr<StreamedDump> WatchEachRank(DumpRanks ranks, const std::vector<WatchCheck>& checks,
                                     const WatchOptions& options,
                                     const std::function<void(size_t, WatchResult&)>& each) {
  const size_t n = ranks.size();
  // Ranks on every core, each rank's tensors on the cores left over.
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const int outer = static_cast<int>(std::clamp<size_t>(n, 1, static_cast<size_t>(threads)));
  WatchOptions one_rank = options;
  one_rank.progress = false;
  one_rank.threads = std::max(1, threads / outer);
  Progress tensors(options.progress ? "watch: tensors" : "", 0);
  return ForEachRank(std::move(ranks), IndexFilter(), outer,
                     options.progress ? "indexing ranks" : "", [&](size_t i, DumpIndex& one) {
                       const size_t index_skipped = one.skipped.size();
                       WatchResult r = RunWatch(one, checks, one_rank);
                       r.skipped.erase(r.skipped.begin(), r.skipped.begin() + index_skipped);
                       const size_t checked = static_cast<size_t>(r.tensors_checked);
                       tensors.Add(checked, checked);
                       each(i, r);
                     });
}

StatusOr<WatchResult> WatchDump(const std::string& dir, const std::vector<WatchCheck>& checks,
                                const WatchOptions& options, std::vector<std::string>* warnings) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks ranks, ListDumpRanks(dir));
  const size_t n = ranks.size();
  std::vector<WatchResult> per_rank(n);
  // Keeps each rank's first `keep_hits` hits and its HitSpread (the dump's first hits are among
  // the ranks' first).
  GRAPHDUMP_ASSIGN_OR_RETURN(
      StreamedDump streamed,
      WatchEachRank(std::move(ranks), checks, options,
                    [&](size_t i, WatchResult& r) { per_rank[i] = std::move(r); }));
  WatchResult result;
  result.skipped = std::move(streamed.skipped);
  result.ranks = streamed.ranks;
  std::vector<Skipped> found;  // while checking, after the index's
  for (size_t i = 0; i < n; ++i) {
    WatchResult& r = per_rank[i];
    for (WatchHit& h : r.hits) result.hits.push_back(std::move(h));
    for (WatchHit& h : r.intended) result.intended.push_back(std::move(h));
    for (Skipped& s : r.skipped) found.push_back(std::move(s));
    result.tensors_checked += r.tensors_checked;
    result.weight_pairs_checked += r.weight_pairs_checked;
    for (const auto& [check, n] : r.judged) result.judged[check] += n;
    result.dropped_hits += r.dropped_hits;
    result.dropped_intended += r.dropped_intended;
    result.spreads.merge(r.spreads);
    for (const auto& [at, count] : r.hit_counts) result.hit_counts[at] += count;
    r = WatchResult();
  }
  for (Skipped& s : found) result.skipped.push_back(std::move(s));
  SortHitsByOccurrence(&result.hits);
  const size_t keep = options.keep_hits;
  if (keep > 0) {
    // The dump's first `keep` hits, and each rank's first (FirstHitPerRank).
    std::set<uint32_t> seen;
    std::vector<WatchHit> kept;
    for (size_t i = 0; i < result.hits.size(); ++i) {
      const bool first_of_rank = seen.insert(result.hits[i].rank).second;
      if (i < keep || first_of_rank) kept.push_back(std::move(result.hits[i]));
    }
    result.dropped_hits += result.hits.size() - kept.size();
    result.hits = std::move(kept);
    if (result.intended.size() > keep) {
      result.dropped_intended += result.intended.size() - keep;
      result.intended.resize(keep);
    }
  }
  *warnings = std::move(streamed.warnings);
  return result;
}

HitSpreadBuilder::HitSpreadBuilder(std::string_view first_kernel, int64_t first_iteration,
                                   size_t shown)
    : seen_{first_kernel}, shown_(shown) {
  spread_.last_iteration = first_iteration;
}

void HitSpreadBuilder::Add(std::string_view kernel, int64_t iteration) {
  ++spread_.later;
  if (iteration >= 0) spread_.last_iteration = std::max(spread_.last_iteration, iteration);
  if (seen_.insert(kernel).second) {
    ++spread_.kernel_count;
    if (spread_.kernels.size() < shown_) spread_.kernels.emplace_back(kernel);
  }
}

HitSpread SpreadAfter(const std::vector<WatchHit>& hits, const WatchHit& first, size_t shown) {
  HitSpreadBuilder spread(first.kernel, first.iteration, shown);
  bool passed_first = false;
  for (const WatchHit& h : hits) {
    if (h.rank != first.rank) continue;
    if (!passed_first) {  // hits are in execution order: those before the first are none
      passed_first = &h == &first || (h.kernel == first.kernel && h.iteration == first.iteration &&
                                      h.call == first.call && h.is_input == first.is_input &&
                                      h.slot == first.slot && h.check == first.check);
      continue;
    }
    spread.Add(h.kernel, h.iteration);
  }
  return spread.Take();
}

std::vector<WatchHit> FirstHitPerRank(const WatchResult& result) {
  std::set<uint32_t> seen;
  std::vector<WatchHit> firsts;
  for (const WatchHit& h : result.hits) {
    if (seen.insert(h.rank).second) firsts.push_back(h);
  }
  return firsts;
}

}  // namespace graphdump::analysis
