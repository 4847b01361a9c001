// watch's result as JSON (watch.h): WatchResultJson of a result in memory, and SpilledWatch,
// which writes the same text for a whole dump from runs of hits spilled rank by rank.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "graphdump/analysis/source_json.h"
#include "graphdump/analysis/spilled_runs.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

nlohmann::json HitJson(const WatchHit& h) {
  return {{"rank", h.rank},
          {"graph_id", h.graph_id},
          {"iteration", h.iteration},
          {"call", h.call},
          {"order", h.order},
          {"sequence", h.sequence},
          {"kernel", h.kernel},
          {"io", h.is_input ? "input" : "output"},
          {"slot", h.slot},
          {"check", h.check},
          {"detail", h.detail},
          {"first_index",
           h.has_position ? nlohmann::json(h.first_index) : nlohmann::json(nullptr)},
          {"row", h.row >= 0 ? nlohmann::json(h.row) : nlohmann::json(nullptr)},
          {"source_line", h.source_line},
          {"source_trace", SourceTraceJson<nlohmann::json>(h.source_trace)},
          {"path", h.path}};
}

nlohmann::json SkippedJson(const std::vector<Skipped>& skipped) {
  nlohmann::json list = nlohmann::json::array();
  for (const Skipped& s : skipped) list.push_back({{"path", s.path}, {"reason", s.reason}});
  return list;
}

// OccurrenceKey as SpilledRuns' key words.
constexpr size_t kKeyWords = 7;
std::array<uint64_t, kKeyWords> OccurrenceKey(const WatchHit& h) {
  return {h.iteration < 0, OrderedWord(h.iteration), h.sequence, !h.is_input, h.rank,
          h.graph_id, h.slot};
}

// An element of an array that is a value of the top object: indented by 4.
void AppendElement(const nlohmann::json& value, std::string* out) {
  out->append(4, ' ');
  AppendIndented(internal::JsonText(value, 2), 4, out);
}

constexpr size_t kChunk = size_t{1} << 20;

}  // namespace

std::string WatchResultJson(const WatchResult& result) {
  using nlohmann::json;
  json hits = json::array();
  for (const WatchHit& h : result.hits) {
    hits.push_back(HitJson(h));
  }
  json intended = json::array();
  for (const WatchHit& h : result.intended) intended.push_back(HitJson(h));
  json j = {{"tensors_checked", result.tensors_checked},
            {"weight_pairs_checked", result.weight_pairs_checked},
            {"judged", result.judged},
            {"nothing_judged", NothingJudged(result.judged)},
            {"hits", hits},
            {"first_hit", hits.empty() ? json(nullptr) : hits[0]},
            {"intended_infinities", intended},
            {"skipped", SkippedJson(result.skipped)}};
  if (result.ranks > 1) {
    const std::vector<WatchHit> firsts = FirstHitPerRank(result);
    json per_rank = json::array();
    for (const WatchHit& h : firsts) per_rank.push_back(HitJson(h));
    j["first_hit_per_rank"] = per_rank;
    j["first_rank"] = firsts.empty() ? json(nullptr) : json(firsts.front().rank);
  }
  return internal::JsonText(j, 2);
}

struct SpilledWatch::Spill {
  explicit Spill(size_t ranks) : hits(ranks, kKeyWords), intended(ranks, 0), firsts(ranks) {}
  SpilledRuns hits, intended;        // a run per rank
  std::vector<std::optional<WatchHit>> firsts;  // each rank's first hit, by position
  size_t ranks = 0;
  int64_t tensors_checked = 0, weight_pairs_checked = 0;
};

SpilledWatch::SpilledWatch() = default;
SpilledWatch::~SpilledWatch() = default;

size_t SpilledWatch::hits() const {
  size_t n = 0;
  for (size_t r = 0; r < spill_->firsts.size(); ++r) n += spill_->hits.count(r);
  return n;
}

StatusOr<std::unique_ptr<SpilledWatch>> SpilledWatch::Run(const std::string& dir,
                                                          const std::vector<WatchCheck>& checks,
                                                          const WatchOptions& options,
                                                          std::vector<std::string>* warnings) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks listed, ListDumpRanks(dir));
  std::unique_ptr<SpilledWatch> watch(new SpilledWatch());
  watch->spill_ = std::make_unique<Spill>(listed.size());
  Spill& spill = *watch->spill_;
  std::vector<std::vector<Skipped>> found(listed.size());  // while checking, by rank
  std::mutex mutex;
  Status failed;
  WatchOptions every = options;
  every.keep_hits = 0;
  StatusOr<StreamedDump> streamed_or = WatchEachRank(std::move(listed), checks, every, [&](size_t i,
                                                                            WatchResult& r) {
        SortHitsByOccurrence(&r.hits);  // RunWatch's order already: a run for the merge
        std::string chunk, text;
        Status status;
        for (const WatchHit& h : r.hits) {
          text.clear();
          AppendElement(HitJson(h), &text);
          spill.hits.Encode(OccurrenceKey(h).data(), text, &chunk);
          if (chunk.size() >= kChunk && status.ok()) status = spill.hits.Append(i, &chunk);
        }
        if (status.ok()) status = spill.hits.Append(i, &chunk);
        for (const WatchHit& h : r.intended) {
          text.clear();
          AppendElement(HitJson(h), &text);
          spill.intended.Encode(nullptr, text, &chunk);
          if (chunk.size() >= kChunk && status.ok()) status = spill.intended.Append(i, &chunk);
        }
        if (status.ok()) status = spill.intended.Append(i, &chunk);
        std::lock_guard<std::mutex> lock(mutex);
        if (!r.hits.empty()) spill.firsts[i] = std::move(r.hits.front());
        found[i] = std::move(r.skipped);
        spill.tensors_checked += r.tensors_checked;
        spill.weight_pairs_checked += r.weight_pairs_checked;
        for (const auto& [check, n] : r.judged) watch->judged_[check] += n;
        if (failed.ok()) failed = status;
      });
  GRAPHDUMP_RETURN_IF_ERROR(streamed_or.status());
  GRAPHDUMP_RETURN_IF_ERROR(failed);
  StreamedDump& streamed = *streamed_or;
  spill.ranks = streamed.ranks;
  watch->skipped_ = std::move(streamed.skipped);
  for (std::vector<Skipped>& rank : found) {
    for (Skipped& s : rank) watch->skipped_.push_back(std::move(s));
  }
  *warnings = std::move(streamed.warnings);
  return watch;
}

Status SpilledWatch::WriteJson(const std::function<Status(std::string_view)>& write) const {
  const Spill& spill = *spill_;
  // Each rank's first hit in the order the merge gives them: FirstHitPerRank's.
  std::vector<size_t> firsts;
  for (size_t r = 0; r < spill.firsts.size(); ++r) {
    if (spill.firsts[r]) firsts.push_back(r);
  }
  std::stable_sort(firsts.begin(), firsts.end(), [&](size_t a, size_t b) {
    return OccurrenceKey(*spill.firsts[a]) < OccurrenceKey(*spill.firsts[b]);
  });
  std::string out = "{\n  \"first_hit\": ";
  if (firsts.empty()) {
    out += "null";
  } else {
    AppendIndented(internal::JsonText(HitJson(*spill.firsts[firsts.front()]), 2), 2, &out);
  }
  out += ",\n";
  if (spill.ranks > 1) {
    nlohmann::json per_rank = nlohmann::json::array();
    for (size_t r : firsts) per_rank.push_back(HitJson(*spill.firsts[r]));
    out += "  \"first_hit_per_rank\": ";
    AppendIndented(internal::JsonText(per_rank, 2), 2, &out);
    out += fmt::format(",\n  \"first_rank\": {},\n",
                       firsts.empty() ? "null" : std::to_string(spill.firsts[firsts[0]]->rank));
  }
  out += "  \"hits\": ";
  GRAPHDUMP_RETURN_IF_ERROR(AppendJsonArray(
      hits(), [&](const TextSink& each) { return spill.hits.Merge(each); }, write, &out));
  out += ",\n";
  size_t intended = 0;
  for (size_t r = 0; r < spill.firsts.size(); ++r) intended += spill.intended.count(r);
  out += "  \"intended_infinities\": ";
  auto read_intended = [&](const TextSink& each) {
    for (size_t r = 0; r < spill.firsts.size(); ++r) {
      GRAPHDUMP_RETURN_IF_ERROR(spill.intended.Read(r, each));
    }
    return Status::Ok();
  };
  GRAPHDUMP_RETURN_IF_ERROR(AppendJsonArray(intended, read_intended, write, &out));
  // Keys in WatchResultJson's order (a JSON object's: alphabetical).
  out += ",\n  \"judged\": ";
  AppendIndented(internal::JsonText(nlohmann::json(judged_), 2), 2, &out);
  out += ",\n  \"nothing_judged\": ";
  AppendIndented(internal::JsonText(nlohmann::json(NothingJudged(judged_)), 2), 2, &out);
  out += ",\n  \"skipped\": ";
  AppendIndented(internal::JsonText(SkippedJson(skipped_), 2), 2, &out);
  out += fmt::format(",\n  \"tensors_checked\": {},\n  \"weight_pairs_checked\": {}\n}}",
                     spill.tensors_checked, spill.weight_pairs_checked);
  return write(out);
}

}  // namespace graphdump::analysis
