// rank_compare.h's SpilledRankCompare: compare --ranks --json and --out written from runs of
// kernels spilled rank by rank and merged, as RankCompareResultJson and CompareResultCsv print
// the whole result.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compare_json.h"
#include "graphdump/analysis/rank_compare.h"
#include "graphdump/analysis/spilled_runs.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

// MergeRankComparisons' sort key (SortByMergeKey's) as SpilledRuns' key words.
constexpr size_t kKeyWords = 5;
std::array<uint64_t, kKeyWords> MergeWords(const KernelComparison& k) {
  return {k.graph_id, k.iteration < 0, OrderedWord(k.iteration), OrderedWord(k.order), k.rank};
}

constexpr size_t kChunk = size_t{1} << 20;

}  // namespace

struct SpilledRankCompare::Spill {
  Spill(size_t parts, bool json, bool csv) : first(parts) {
    if (json) {
      kernels.emplace(parts, kKeyWords);
      unpaired.emplace(parts, 0);
    }
    if (csv) rows.emplace(parts, kKeyWords);
  }
  std::optional<SpilledRuns> kernels, unpaired, rows;
  struct First {
    std::array<uint64_t, kKeyWords> key;
    nlohmann::json brief, disagreement;
  };
  std::vector<std::optional<First>> first;  // each rank's first failure, with `json`
  size_t parts = 0;
};

SpilledRankCompare::SpilledRankCompare() = default;
SpilledRankCompare::~SpilledRankCompare() = default;

size_t SpilledRankCompare::kernels() const {
  if (!spill_->kernels) return result_.result.kernels.size() + result_.dropped_kernels;
  size_t n = 0;
  for (size_t i = 0; i < spill_->parts; ++i) n += spill_->kernels->count(i);
  return n;
}

size_t SpilledRankCompare::unpaired() const {
  if (!spill_->unpaired) return result_.result.unpaired.size() + result_.dropped_unpaired;
  size_t n = 0;
  for (size_t i = 0; i < spill_->parts; ++i) n += spill_->unpaired->count(i);
  return n;
}

StatusOr<std::unique_ptr<SpilledRankCompare>> SpilledRankCompare::Run(
    const std::string& dir, const RankCompareOptions& options, bool json, bool csv,
    std::vector<std::string>* warnings) {
  std::unique_ptr<SpilledRankCompare> out(new SpilledRankCompare());
  // Sized on the first part: every rank but the reference is a part.
  std::mutex mutex;
  Status failed;
  RankCompareOptions each = options;
  if (json) each.keep_shown = 0;
  auto spill_part = [&](size_t i, CompareResult& part) {
    SortByMergeKey(&part.kernels);  // the runs the merge takes (MergeWords' order)
    Spill& spill = *out->spill_;
    Status status;
    std::string chunk, rows, text;
    std::optional<Spill::First> first;
    for (const KernelComparison& k : part.kernels) {
      const auto key = MergeWords(k);
      if (spill.kernels) {
        text.assign(4, ' ');
        AppendIndented(internal::JsonText(KernelComparisonJson(part, k), 2), 4, &text);
        spill.kernels->Encode(key.data(), text, &chunk);
        if (chunk.size() >= kChunk && status.ok()) status = spill.kernels->Append(i, &chunk);
        if (!first && k.verdict == Verdict::kError) {
          first = Spill::First{key, BriefKernelJson(part, k), FirstDisagreementJson(k, 0)};
        }
      }
      if (spill.rows) {
        text.clear();
        AppendCompareCsvRows(k, k.contribution_rank, &text);
        spill.rows->Encode(key.data(), text, &rows);
        if (rows.size() >= kChunk && status.ok()) status = spill.rows->Append(i, &rows);
      }
    }
    if (spill.kernels && status.ok()) status = spill.kernels->Append(i, &chunk);
    if (spill.rows && status.ok()) status = spill.rows->Append(i, &rows);
    if (spill.unpaired) {
      for (const UnpairedKernel& u : part.unpaired) {
        text.assign(4, ' ');
        AppendIndented(internal::JsonText(UnpairedKernelJson(u), 2), 4, &text);
        spill.unpaired->Encode(nullptr, text, &chunk);
      }
      if (status.ok()) status = spill.unpaired->Append(i, &chunk);
      part.kernels.clear();
      part.unpaired.clear();
    }
    std::lock_guard<std::mutex> lock(mutex);
    spill.first[i] = std::move(first);
    if (failed.ok()) failed = status;
  };
  // The parts are known once the ranks are listed; CompareRanksInDump lists them again.
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks listed, ListDumpRanks(dir));
  std::vector<uint32_t> available;
  for (size_t i = 0; i < listed.size(); ++i) available.push_back(listed.rank(i));
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                             RanksToCompare(available, options.ranks, dir));
  out->spill_ = std::make_unique<Spill>(ids.size() - 1, json, csv);
  out->spill_->parts = ids.size() - 1;
  GRAPHDUMP_ASSIGN_OR_RETURN(out->result_, CompareRanksInDump(dir, each, warnings, spill_part));
  GRAPHDUMP_RETURN_IF_ERROR(failed);
  return out;
}

Status SpilledRankCompare::WriteJson(const std::function<Status(std::string_view)>& write) const {
  using nlohmann::json;
  const Spill& spill = *spill_;
  // The first failure of the merged order: the least key, then the first rank.
  std::optional<size_t> first;
  for (size_t i = 0; i < spill.first.size(); ++i) {
    if (spill.first[i] && (!first || spill.first[i]->key < spill.first[*first]->key)) first = i;
  }
  // RankCompareResultJson's document with the two long arrays left out.
  const CompareResult& r = result_.result;
  json j;
  j["summary"] = {{"kernels", kernels()},   {"pass", r.passed},
                  {"warning", r.warnings},  {"error", r.errors},
                  {"unpaired", unpaired()}, {"skipped", r.skipped.size()}};
  j["kernels"] = "";
  j["first_failure"] = first ? spill.first[*first]->brief : json(nullptr);
  j["first_adding_error"] = nullptr;
  j["contributors"] = json::array();
  j["differing_sources"] = json::array();
  j["differing_graph_inputs"] = json::array();
  j["unpaired"] = "";
  j["call_count_differences"] = json::array();
  j["skipped"] = SkippedJson(r.skipped);
  j["reference_rank"] = result_.reference_rank;
  j["compared_ranks"] = result_.compared_ranks;
  json disagreement = nullptr;
  if (first) {
    disagreement = spill.first[*first]->disagreement;
    disagreement["reference_rank"] = result_.reference_rank;
  }
  j["first_disagreement"] = disagreement;
  const auto [head, rest] = SplitJsonAt(internal::JsonText(j, 2), "kernels");
  const auto [middle, tail] = SplitJsonAt(rest, "unpaired");
  std::string out = head;
  GRAPHDUMP_RETURN_IF_ERROR(AppendJsonArray(
      kernels(), [&](const TextSink& each) { return spill.kernels->Merge(each); }, write, &out));
  out += middle;
  auto read_unpaired = [&](const TextSink& each) {
    for (size_t i = 0; i < spill.parts; ++i) {
      GRAPHDUMP_RETURN_IF_ERROR(spill.unpaired->Read(i, each));
    }
    return Status::Ok();
  };
  GRAPHDUMP_RETURN_IF_ERROR(AppendJsonArray(unpaired(), read_unpaired, write, &out));
  out += tail;
  return write(out);
}

Status SpilledRankCompare::WriteCsv(const std::string& path) const {
  return WriteCompareCsv(path, *spill_->rows,
                         [](std::string_view rows, std::string* out) { *out += rows; });
}

}  // namespace graphdump::analysis
