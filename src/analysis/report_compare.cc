// report_compare.h: what the page shows of a comparison, kept rank pair by rank pair.
#include "graphdump/analysis/report_compare.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/internal/report_parts.h"

namespace graphdump::analysis {
namespace {

// The kernel without its tensors and source trace (what the page prints of it), and without the
// contribution rank its part gave it (the page ranks over every part); `k` is left as it was.
KernelComparison Light(KernelComparison& k) {
  KernelComparison light = KernelWithoutTensors(k);
  light.contribution_rank = 0;
  return light;
}

// Summarize's ranking of the contributors (CompareContribution): discrete divergences first, then
// the largest added error, then the larger growth, then execution order.
template <typename C>
void Rank(std::vector<C>* list) {
  std::stable_sort(list->begin(), list->end(), [](const C& a, const C& b) {
    const int order = CompareContribution(a.key, b.key);
    return order != 0 ? order < 0 : a.position < b.position;
  });
}

// `c`'s shown kernels, positions and indices from the kernels by position, the ranked
// contributors' positions and the first differing source's (-1: none).
void Assemble(std::map<int64_t, KernelComparison> kernels, const std::vector<int64_t>& ranked,
              int64_t source, ReportComparison* c) {
  c->shown.kernels.clear();
  c->positions.clear();
  std::map<int64_t, int64_t> index;
  for (auto& [position, k] : kernels) {
    index[position] = static_cast<int64_t>(c->shown.kernels.size());
    c->positions.push_back(position);
    c->shown.kernels.push_back(std::move(k));
  }
  c->shown.contributors.clear();
  for (int64_t p : ranked) c->shown.contributors.push_back(index.at(p));
  c->shown.differing_sources.clear();
  if (source >= 0) c->shown.differing_sources.push_back(index.at(source));
}

// Puts the kernels of `rank` in `r` whole into `c`, kernel i at position offset + i.
void Overlay(const CompareResult& r, int64_t offset, uint32_t rank, ReportComparison* c) {
  std::map<int64_t, KernelComparison> kernels;
  for (size_t i = 0; i < c->shown.kernels.size(); ++i) {
    kernels.emplace(c->positions[i], std::move(c->shown.kernels[i]));
  }
  std::vector<int64_t> ranked;
  for (int64_t i : c->shown.contributors) ranked.push_back(c->positions[i]);
  const int64_t source =
      c->shown.differing_sources.empty() ? -1 : c->positions[c->shown.differing_sources[0]];
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    if (r.kernels[i].rank != rank) continue;
    KernelComparison& k = kernels[offset + static_cast<int64_t>(i)];
    const int contribution_rank = k.contribution_rank;  // 0 when it was not shown
    k = r.kernels[i];
    k.contribution_rank = contribution_rank;
  }
  Assemble(std::move(kernels), ranked, source, c);
}

}  // namespace

void ReportCompareCollector::Add(CompareResult& part) {
  CompareResult& shown = result_.shown;
  result_.kernels += part.kernels.size();
  shown.passed += part.passed;
  shown.warnings += part.warnings;
  shown.errors += part.errors;
  std::vector<Contributor> found;
  for (size_t i = 0; i < part.kernels.size(); ++i) {
    KernelComparison& k = part.kernels[i];
    const int64_t position = offset_ + static_cast<int64_t>(i);
    if (i == 0 || k.rank != part.kernels[i - 1].rank) {
      result_.rank_offsets.emplace(k.rank, position);
    }
    bool keep = false;
    if (k.verdict != Verdict::kPass) keep = ++result_.not_passed <= kReportRowsShown;
    if (k.verdict == Verdict::kError && report_internal::IsComputed(k.op_type, k.iteration)) {
      ++result_.failing[{k.rank, k.iteration}];
      keep |= failing_ranks_.insert(k.rank).second;  // each rank's first: the selector names it
    }
    if (k.role != KernelRole::kOperator && k.verdict == Verdict::kError && !source_kept_) {
      source_kept_ = true;
      source_position_ = position;
      keep = true;
    }
    if (keep) kept_.emplace(position, Light(k));
    if (k.role == KernelRole::kOperator && k.adds_error) {
      ++result_.contributors;
      found.push_back({ContributionKeyOf(k), position, Light(k), {}});
    }
  }
  if (replays_ > 0 && !found.empty()) {
    // The best of each (rank, kernel): the first `replays_` of them are ReplaySuspects' choice.
    std::move(candidates_.begin(), candidates_.end(), std::back_inserter(found));
    candidates_.clear();
    Rank(&found);
    std::set<std::pair<uint32_t, std::string>> seen;
    for (Contributor& f : found) {
      if (candidates_.size() >= replays_) break;
      if (seen.insert({f.kernel.rank, f.kernel.name_a}).second) candidates_.push_back(f);
    }
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const Contributor& f) { return f.position < offset_; }),
                found.end());
  }
  std::move(found.begin(), found.end(), std::back_inserter(top_));
  Rank(&top_);
  if (top_.size() > kReportRowsShown) top_.resize(kReportRowsShown);
  // A contributor among the first kReportChainsShown now was among them when its part came (a
  // later part only pushes it down): its chain is written while its part is here.
  for (size_t j = 0; j < top_.size() && j < kReportChainsShown; ++j) {
    Contributor& t = top_[j];
    if (t.position < offset_) continue;
    t.chain = PrecisionChainText(part, InputChain(part, t.position - offset_), "");
  }
  result_.unpaired += part.unpaired.size();
  for (const UnpairedKernel& u : part.unpaired) {
    if (shown.unpaired.size() >= kReportRowsShown) break;
    shown.unpaired.push_back(u);
  }
  result_.skipped += part.skipped.size();
  for (const Skipped& s : part.skipped) {
    if (part_skipped_.size() >= kReportRowsShown) break;
    part_skipped_.push_back(s);
  }
  offset_ += static_cast<int64_t>(part.kernels.size());
}

ReportComparison ReportCompareCollector::Finish(const std::vector<Skipped>& index_skipped) {
  ReportComparison c = std::move(result_);
  std::map<int64_t, KernelComparison> kernels = std::move(kept_);
  std::vector<int64_t> ranked;
  std::set<int64_t> in_top;
  for (size_t j = 0; j < top_.size(); ++j) {
    Contributor& t = top_[j];
    t.kernel.contribution_rank = static_cast<int>(j + 1);
    kernels[t.position] = std::move(t.kernel);
    ranked.push_back(t.position);
    in_top.insert(t.position);
    if (j < kReportChainsShown) c.chains.push_back(std::move(t.chain));
  }
  // Candidates beyond the first kReportRowsShown rank after all of them.
  for (Contributor& t : candidates_) {
    if (in_top.count(t.position)) continue;
    kernels.emplace(t.position, std::move(t.kernel));
    ranked.push_back(t.position);
  }
  Assemble(std::move(kernels), ranked, source_kept_ ? source_position_ : -1, &c);
  c.skipped += index_skipped.size();
  c.shown.skipped = index_skipped;
  for (Skipped& s : part_skipped_) c.shown.skipped.push_back(std::move(s));
  if (c.shown.skipped.size() > kReportRowsShown) c.shown.skipped.resize(kReportRowsShown);
  return c;
}

ReportComparison ReportComparisonOf(const CompareResult& whole, uint32_t rank) {
  ReportCompareCollector collector(0);
  CompareResult copy = whole;
  collector.Add(copy);
  ReportComparison c = collector.Finish({});
  Overlay(whole, 0, rank, &c);
  return c;
}

StatusOr<CompareResult> CompareRankPair(const std::string& a, const std::string& b, uint32_t rank,
                                        const CompareOptions& options) {
  IndexFilter only;
  only.ranks = std::set<uint32_t>{rank};
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpIndex one_a, IndexDump(a, only));
  const StatusOr<DumpRanks> listed = ListDumpRanks(b);
  if (!listed.ok()) return listed.status();
  const DumpRanks& ranks_b = *listed;
  DumpIndex one_b;
  bool held = false;
  for (size_t j = 0; j < ranks_b.size(); ++j) held |= ranks_b.rank(j) == rank;
  if (held) {
    GRAPHDUMP_ASSIGN_OR_RETURN(one_b, IndexDump(b, only));
  } else if (ranks_b.size() == 1) {
    GRAPHDUMP_ASSIGN_OR_RETURN(one_b, IndexDump(b, IndexFilter()));
  }
  CompareOptions quiet = options;
  quiet.progress = false;
  return CompareDumps(one_a, one_b, quiet);
}

void AddChartedRank(const CompareResult& part, ReportComparison* c) {
  if (part.kernels.empty()) return;
  const uint32_t rank = part.kernels.front().rank;
  auto offset = c->rank_offsets.find(rank);
  if (offset == c->rank_offsets.end()) return;
  Overlay(part, offset->second, rank, c);
}

}  // namespace graphdump::analysis
