// compare over two dump directories, one rank pair at a time (compare.h, CompareDumpDirs): memory
// holds the rank pairs being compared and the result, not the two dumps' indexes.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis {
namespace {

void AddIterations(const RankEntry& rank, std::set<int64_t>* iterations) {
  for (const GraphEntry& g : rank.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration >= 0) iterations->insert(it.iteration);
    }
  }
}

// The index warnings of ranks indexed one by one, merged as ForEachRank merges those of the ranks
// it indexes together: the first sentence, then how many more iteration directories hold two
// runs. A rank's own warning reads "SENTENCE" or "SENTENCE (and N more iteration directories)".
std::vector<std::string> MergeRankWarnings(const std::vector<std::vector<std::string>>& ranks) {
  static const std::string kOpen = " (and ", kClose = " more iteration directories)";
  std::string first;
  size_t mixed = 0;
  std::vector<std::string> incomplete;  // each rank's own (IncompleteWarning), kept as they are
  for (const std::vector<std::string>& warnings : ranks) {
    for (const std::string& text : warnings) {
      if (text.find(" is marked incomplete (") != std::string::npos) {
        incomplete.push_back(text);
        continue;
      }
      std::string sentence = text;
      size_t count = 1, more = 0;
      const size_t open = text.rfind(kOpen);
      if (open != std::string::npos && text.size() > kClose.size() &&
          text.compare(text.size() - kClose.size(), kClose.size(), kClose) == 0) {
        const char* begin = text.data() + open + kOpen.size();
        const char* end = text.data() + text.size() - kClose.size();
        const auto parsed = std::from_chars(begin, end, more);
        if (parsed.ec == std::errc() && parsed.ptr == end) {
          count += more;
          sentence = text.substr(0, open);
        }
      }
      if (mixed == 0) first = sentence;
      mixed += count;
    }
  }
  if (mixed == 0) return incomplete;
  if (mixed > 1) first += fmt::format("{}{}{}", kOpen, mixed - 1, kClose);
  incomplete.insert(incomplete.begin(), first);
  return incomplete;
}

// The reference dump's ranks. Each is indexed when a rank of A asks for it, and freed after; a
// GE-layout dump (indexed at once by ListDumpRanks) and a dump of one rank (the partner of every
// rank of A) are held instead.
class ReferenceRanks {
 public:
  explicit ReferenceRanks(DumpRanks ranks) : ranks_(std::move(ranks)) {
    const size_t n = std::max<size_t>(ranks_.size(), 1);
    skipped_.resize(n);
    warnings_.resize(n);
    seen_.resize(n);
    if (ranks_.whole) {
      held_ = std::move(*ranks_.whole);
      ranks_.whole.reset();
      for (const RankEntry& r : held_->ranks) held_ids_.push_back(r.rank);
      for (const RankEntry& r : held_->ranks) AddIterations(r, &iterations_);
      skipped_[0] = std::move(held_->skipped);
      warnings_[0] = std::move(held_->warnings);
    } else if (n == 1) {
      held_.emplace();
      held_->root = ranks_.root;
      Index(0, [&](DumpIndex& one) { held_->ranks = std::move(one.ranks); });
      held_ids_.push_back(ranks_.rank(0));
    }
  }

  size_t size() const { return held_ ? held_->ranks.size() : ranks_.size(); }
  uint32_t rank(size_t j) const { return held_ ? held_ids_[j] : ranks_.rank(j); }

  // The rank compared with A's rank `id`: B's rank of that id, else B's only rank (CompareDumps'
  // pairing).
  std::optional<size_t> PartnerOf(uint32_t id) const {
    for (size_t j = 0; j < size(); ++j) {
      if (rank(j) == id) return j;
    }
    if (size() == 1) return 0;
    return std::nullopt;
  }

  // Calls f(index, rank) with rank `j` indexed. Thread-safe for different `j`, and for any `j`
  // when the ranks are held.
  void With(size_t j, const std::function<void(const DumpIndex&, const RankEntry&)>& f) {
    if (held_) {
      f(*held_, held_->ranks[j]);
    } else {
      Index(j, [&](DumpIndex& one) { f(one, one.ranks.front()); });
    }
  }

  // After the comparisons: indexes the ranks no rank of A asked for (for their skipped files,
  // warnings and iterations, as IndexDump of the whole dump lists them), then gives the skipped
  // files in the order of the rank directories' names, the warnings and the iterations.
  void Finish(std::vector<Skipped>* skipped, std::vector<std::string>* warnings,
              std::set<int64_t>* iterations) {
    if (!held_) {
      for (size_t j = 0; j < ranks_.size(); ++j) {
        if (!seen_[j]) Index(j, [](DumpIndex&) {});
      }
    }
    std::vector<size_t> by_name(skipped_.size());
    for (size_t j = 0; j < by_name.size(); ++j) by_name[j] = j;
    if (!held_) {
      std::stable_sort(by_name.begin(), by_name.end(), [&](size_t x, size_t y) {
        return ranks_.dirs[x].first < ranks_.dirs[y].first;
      });
    }
    for (size_t j : by_name) {
      for (Skipped& s : skipped_[j]) skipped->push_back(std::move(s));
    }
    *warnings = MergeRankWarnings(warnings_);
    *iterations = std::move(iterations_);
  }

  // The error of the first rank that could not be read (a directory of it), if any: the ranks of
  // A it partners were compared with nothing.
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  // Indexes rank `j` alone and calls f(its index).
  void Index(size_t j, const std::function<void(DumpIndex&)>& f) {
    DumpRanks one;
    one.root = ranks_.root;
    one.dirs.push_back(ranks_.dirs[j]);
    StatusOr<StreamedDump> streamed = ForEachRank(std::move(one), IndexFilter(), 1, "",
                                                  [&](size_t, DumpIndex& index) {
                                                    {
                                                      std::lock_guard<std::mutex> lock(mu_);
                                                      AddIterations(index.ranks.front(),
                                                                    &iterations_);
                                                    }
                                                    f(index);
                                                  });
    seen_[j] = 1;
    if (!streamed.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = streamed.status();
      return;
    }
    skipped_[j] = std::move(streamed->skipped);
    warnings_[j] = std::move(streamed->warnings);
  }

  DumpRanks ranks_;
  std::optional<DumpIndex> held_;
  std::vector<uint32_t> held_ids_;
  std::vector<std::vector<Skipped>> skipped_;  // by position
  std::vector<std::vector<std::string>> warnings_;
  std::vector<char> seen_;
  std::mutex mu_;
  std::set<int64_t> iterations_;
  Status error_;  // the first rank that could not be read
};

}  // namespace

StatusOr<CompareResult> CompareDumpDirs(
    const std::string& a, const std::string& b, const CompareOptions& options,
    CompareDirsInfo* info,
    const std::function<void(size_t, const DumpIndex&, int threads)>& each_a,
    const std::function<void(CompareResult&)>& each_part) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks ranks_a, ListDumpRanks(a));
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks ranks_b, ListDumpRanks(b));
  const size_t n = ranks_a.size();
  ReferenceRanks reference(std::move(ranks_b));
  GRAPHDUMP_RETURN_IF_ERROR(reference.error());
  // Rank pairs on every thread, each pair's tensors on the threads left over (one rank: all).
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const int outer = static_cast<int>(std::clamp<size_t>(n, 1, static_cast<size_t>(threads)));
  CompareOptions each = options;
  each.threads = std::max(1, threads / outer);
  each.progress = options.progress && n == 1;
  std::vector<CompareResult> parts(n);
  std::vector<char> done(n);
  size_t next = 0;  // with each_part: the first part not yet handed over
  std::mutex mu;
  StatusOr<StreamedDump> streamed = ForEachRank(
      std::move(ranks_a), IndexFilter(), outer, options.progress && n > 1 ? "compare: ranks" : "",
      [&](size_t i, DumpIndex& one) {
        if (each_a) each_a(i, one, each.threads);
        const RankEntry& ra = one.ranks.front();
        {
          std::lock_guard<std::mutex> lock(mu);
          AddIterations(ra, &info->iterations_a);
        }
        const std::optional<size_t> j = reference.PartnerOf(ra.rank);
        if (j) {
          reference.With(*j, [&](const DumpIndex& index_b, const RankEntry& rb) {
            compare_internal::ComparePairs({{&one, &ra, &index_b, &rb}}, each, &parts[i]);
          });
        }
        if (!each_part) return;
        // Summarized alone (attribution stays inside a rank), then handed over in A's rank order.
        compare_internal::Summarize(&parts[i]);
        std::vector<CompareResult> handed;  // freed after the lock
        std::lock_guard<std::mutex> lock(mu);
        done[i] = 1;
        for (; next < n && done[next]; ++next) {
          each_part(parts[next]);
          handed.push_back(std::move(parts[next]));
          parts[next] = CompareResult();
        }
      });
  GRAPHDUMP_RETURN_IF_ERROR(streamed.status());
  GRAPHDUMP_RETURN_IF_ERROR(reference.error());
  CompareResult result;
  result.skipped = std::move(streamed->skipped);
  info->warnings_a = std::move(streamed->warnings);
  reference.Finish(&result.skipped, &info->warnings_b, &info->iterations_b);
  GRAPHDUMP_RETURN_IF_ERROR(reference.error());
  if (each_part) return result;
  size_t kernels = 0;
  for (const CompareResult& part : parts) kernels += part.kernels.size();
  result.kernels.reserve(kernels);
  for (CompareResult& part : parts) {
    std::move(part.kernels.begin(), part.kernels.end(), std::back_inserter(result.kernels));
    std::move(part.unpaired.begin(), part.unpaired.end(), std::back_inserter(result.unpaired));
    std::move(part.call_count_differences.begin(), part.call_count_differences.end(),
              std::back_inserter(result.call_count_differences));
    std::move(part.skipped.begin(), part.skipped.end(), std::back_inserter(result.skipped));
    result.passed += part.passed;
    result.warnings += part.warnings;
    result.errors += part.errors;
    part = CompareResult();
  }
  // Already in order when A's ranks come in ascending ids (a rank directory's); kept exact.
  compare_internal::SortKernels(&result.kernels);
  compare_internal::Summarize(&result);
  return result;
}

}  // namespace graphdump::analysis
