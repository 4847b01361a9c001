// compare_spilled.h: compare A B --json and --out written from each rank pair's records, spilled
// as the pairs finish and merged in CompareResult::kernels' order, as CompareResultJson and
// CompareResultCsv print the whole result.
#include "graphdump/analysis/compare_spilled.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <tuple>

#include "compare_json.h"
#include "graphdump/analysis/spilled_runs.h"
#include "graphdump/file_system.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

// SortKernels' key (rank, graph, iteration with constants last, the order a compiled
// comparison's kernels ran in, call, execution order) as SpilledRuns' key words: the merge of
// the parts' runs is the stable sort of the parts' kernels one after the other, which
// CompareDumpDirs' whole result lists.
constexpr size_t kKeyWords = 7;
using Key = std::array<uint64_t, kKeyWords>;
Key KeyOf(const KernelComparison& k) {
  const bool ran = k.ran >= 0;
  return {k.rank,
          ran ? 0u : k.graph_id,
          k.iteration < 0,
          OrderedWord(k.iteration),
          ran ? static_cast<uint64_t>(k.ran) : 0u,
          k.call,
          OrderedWord(k.order)};
}

// Where a kernel lies in the whole result: its key, its part, its index in the part.
using Place = std::tuple<Key, size_t, int64_t>;

constexpr size_t kChunk = size_t{1} << 20;
constexpr uint32_t kNone = ~uint32_t{0};

// A record of a kernel: the contributor it is (kNone: none), where its contribution rank goes in
// the body (each place once), then the body.
void AppendRecord(uint32_t contributor, const std::vector<size_t>& rank_at, std::string_view body,
                  std::string* out) {
  auto word = [&](uint64_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  word(contributor);
  word(rank_at.size());
  for (size_t at : rank_at) word(at);
  out->append(body);
}

// The body of an AppendRecord record with the contributor's rank written in.
void AppendRanked(std::string_view record, const std::vector<int>& rank_of, std::string* out) {
  auto word = [&](size_t i) {
    uint64_t v;
    std::memcpy(&v, record.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  const uint64_t contributor = word(0), count = word(1);
  const std::string_view body = record.substr((2 + count) * sizeof(uint64_t));
  size_t from = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = word(2 + i);
    out->append(body.substr(from, at - from));
    *out += std::to_string(rank_of[contributor]);
    from = at;
  }
  out->append(body.substr(from));
}

// `j` printed as an element of an array of the document (AppendJsonArray's). With `rank_at`,
// the "contribution_rank" of the object (0) is cut out and where it was appended to `rank_at`.
std::string Element(const nlohmann::json& j, std::vector<size_t>* rank_at) {
  std::string text(4, ' ');
  AppendIndented(internal::JsonText(j, 2), 4, &text);
  if (rank_at) {
    // The object's own key: deeper keys are indented further, and strings hold no newline.
    static const std::string kMark = "\n      \"contribution_rank\": 0";
    const size_t at = text.find(kMark) + kMark.size() - 1;
    text.erase(at, 1);
    rank_at->push_back(at);
  }
  return text;
}

}  // namespace

struct SpilledCompare::Spill {
  // Runs are added as parts come: one per part.
  std::optional<SpilledRuns> kernels{std::in_place, 0, kKeyWords},
      sources{std::in_place, 0, kKeyWords}, inputs{std::in_place, 0, kKeyWords},
      unpaired{std::in_place, 0, 0}, calls{std::in_place, 0, 0}, rows;
  bool keep = false;
  struct Contributor {
    Place place;
    ContributionKey key;
    std::string brief;  // its element of "contributors", an AppendRecord record
    std::optional<KernelComparison> kernel;  // with `keep`
  };
  std::vector<Contributor> contributors;
  std::vector<int> rank_of;      // by index into contributors
  std::vector<uint32_t> ranked;  // indexes into contributors, in rank order
  struct First {
    Place place;
    nlohmann::json brief;
    uint32_t contributor;
  };
  std::optional<First> first_failure, first_adding_error;
  size_t parts = 0, kernels_count = 0, sources_count = 0, inputs_count = 0, unpaired_count = 0,
         calls_count = 0;
  int passed = 0, warnings = 0, errors = 0;
  std::vector<Skipped> skipped;
  CompareResult ranked_result;
  Status status;

  void Flush(SpilledRuns& runs, size_t run, std::string* chunk, bool all) {
    if ((all || chunk->size() >= kChunk) && status.ok()) status = runs.Append(run, chunk);
    if (!status.ok()) chunk->clear();
  }
};

SpilledCompare::SpilledCompare(bool csv, bool keep_contributors)
    : spill_(std::make_unique<Spill>()) {
  if (csv) spill_->rows.emplace(0, kKeyWords);
  spill_->keep = keep_contributors;
}

SpilledCompare::~SpilledCompare() = default;

void SpilledCompare::Add(CompareResult& part) {
  Spill& s = *spill_;
  const size_t run = s.parts++;
  for (std::optional<SpilledRuns>* runs :
       {&s.kernels, &s.sources, &s.inputs, &s.unpaired, &s.calls, &s.rows}) {
    if (*runs) (*runs)->AddRun();
  }
  s.kernels_count += part.kernels.size();
  s.passed += part.passed;
  s.warnings += part.warnings;
  s.errors += part.errors;
  // Contribution ranks count over every part (Finish): each contributor's is left out.
  for (KernelComparison& k : part.kernels) k.contribution_rank = 0;
  std::vector<uint32_t> contributor_of(part.kernels.size(), kNone);
  std::vector<size_t> rank_at;
  for (int64_t i : part.contributors) {
    KernelComparison& k = part.kernels[i];
    contributor_of[i] = static_cast<uint32_t>(s.contributors.size());
    Spill::Contributor c{{KeyOf(k), run, i}, ContributionKeyOf(k), {}, {}};
    rank_at.clear();
    const std::string brief = Element(BriefKernelJson(part, k), &rank_at);
    AppendRecord(contributor_of[i], rank_at, brief, &c.brief);
    if (s.keep) c.kernel = KernelWithoutTensors(k);
    s.contributors.push_back(std::move(c));
  }
  auto keep_first = [&](int64_t i, std::optional<Spill::First>* first) {
    if (i < 0) return;
    Place place{KeyOf(part.kernels[i]), run, i};
    if (*first && (*first)->place < place) return;
    *first =
        Spill::First{std::move(place), BriefKernelJson(part, part.kernels[i]), contributor_of[i]};
  };
  keep_first(part.first_failure, &s.first_failure);
  keep_first(part.first_adding_error, &s.first_adding_error);

  std::string chunk, rows, body, record;
  for (size_t i = 0; i < part.kernels.size(); ++i) {
    const KernelComparison& k = part.kernels[i];
    const Key key = KeyOf(k);
    const uint32_t c = contributor_of[i];
    rank_at.clear();
    body = Element(KernelComparisonJson(part, k), c == kNone ? nullptr : &rank_at);
    record.clear();
    AppendRecord(c, rank_at, body, &record);
    s.kernels->Encode(key.data(), record, &chunk);
    s.Flush(*s.kernels, run, &chunk, false);
    if (s.rows) {
      rank_at.clear();
      body.clear();
      AppendCompareCsvRows(k, 0, &body, c == kNone ? nullptr : &rank_at);
      record.clear();
      AppendRecord(c, rank_at, body, &record);
      s.rows->Encode(key.data(), record, &rows);
      s.Flush(*s.rows, run, &rows, false);
    }
  }
  s.Flush(*s.kernels, run, &chunk, true);
  if (s.rows) s.Flush(*s.rows, run, &rows, true);
  for (int64_t i : part.differing_sources) {
    const KernelComparison& k = part.kernels[i];
    s.sources->Encode(KeyOf(k).data(), Element(DifferingSourceJson(k), nullptr), &chunk);
  }
  s.sources_count += part.differing_sources.size();
  s.Flush(*s.sources, run, &chunk, true);
  for (const auto& [i, slot] : part.differing_graph_inputs) {
    const KernelComparison& k = part.kernels[i];
    s.inputs->Encode(KeyOf(k).data(), Element(DifferingGraphInputJson(k, slot), nullptr), &chunk);
  }
  s.inputs_count += part.differing_graph_inputs.size();
  s.Flush(*s.inputs, run, &chunk, true);
  for (const UnpairedKernel& u : part.unpaired) {
    s.unpaired->Encode(nullptr, Element(UnpairedKernelJson(u), nullptr), &chunk);
    s.Flush(*s.unpaired, run, &chunk, false);
  }
  s.unpaired_count += part.unpaired.size();
  s.Flush(*s.unpaired, run, &chunk, true);
  for (const CallCountDifference& d : part.call_count_differences) {
    s.calls->Encode(nullptr, Element(CallCountDifferenceJson(d), nullptr), &chunk);
  }
  s.calls_count += part.call_count_differences.size();
  s.Flush(*s.calls, run, &chunk, true);
  std::move(part.skipped.begin(), part.skipped.end(), std::back_inserter(s.skipped));
}

Status SpilledCompare::Finish(std::vector<Skipped> index_skipped) {
  Spill& s = *spill_;
  // Summarize's ranking (CompareContribution): discrete divergences first, then the largest
  // added error, then the larger growth, then the earlier in the whole result.
  const size_t n = s.contributors.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return s.contributors[x].place < s.contributors[y].place;
  });
  std::vector<size_t> position(n);
  for (size_t i = 0; i < n; ++i) position[order[i]] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const int order = CompareContribution(s.contributors[x].key, s.contributors[y].key);
    return order != 0 ? order < 0 : position[x] < position[y];
  });
  s.rank_of.assign(n, 0);
  for (size_t i = 0; i < n; ++i) s.rank_of[order[i]] = static_cast<int>(i + 1);
  s.ranked = std::move(order);
  for (std::optional<Spill::First>* first : {&s.first_failure, &s.first_adding_error}) {
    if (*first && (*first)->contributor != kNone) {
      (*first)->brief["contribution_rank"] = s.rank_of[(*first)->contributor];
    }
  }
  if (s.keep) {
    for (uint32_t c : s.ranked) {
      KernelComparison& k = *s.contributors[c].kernel;
      k.contribution_rank = s.rank_of[c];
      s.ranked_result.contributors.push_back(static_cast<int64_t>(s.ranked_result.kernels.size()));
      s.ranked_result.kernels.push_back(std::move(k));
      s.contributors[c].kernel.reset();
    }
  }
  std::move(s.skipped.begin(), s.skipped.end(), std::back_inserter(index_skipped));
  s.skipped = std::move(index_skipped);
  return s.status;
}

size_t SpilledCompare::kernels() const { return spill_->kernels_count; }
bool SpilledCompare::failed() const { return spill_->first_failure.has_value(); }
const std::vector<Skipped>& SpilledCompare::skipped() const { return spill_->skipped; }
const CompareResult& SpilledCompare::ranked() const { return spill_->ranked_result; }

Status SpilledCompare::WriteJson(const std::string* replays,
                                 const std::function<Status(std::string_view)>& write) const {
  using nlohmann::json;
  const Spill& s = *spill_;
  // CompareResultJson's document with its arrays of records left out, in the order it prints
  // them (its keys sorted).
  json j;
  j["summary"] = {{"kernels", s.kernels_count},   {"pass", s.passed},
                  {"warning", s.warnings},        {"error", s.errors},
                  {"unpaired", s.unpaired_count}, {"skipped", s.skipped.size()}};
  j["first_failure"] = s.first_failure ? s.first_failure->brief : json(nullptr);
  j["first_adding_error"] = s.first_adding_error ? s.first_adding_error->brief : json(nullptr);
  j["skipped"] = SkippedJson(s.skipped);
  if (replays) j["replays"] = json::parse(*replays);
  std::string text;
  auto ranked = [&](const TextSink& each) {
    return [&text, &s, &each](std::string_view record) {
      text.clear();
      AppendRanked(record, s.rank_of, &text);
      return each(text);
    };
  };
  using Read = std::function<Status(const TextSink&)>;
  auto in_parts = [&s](const SpilledRuns* runs) -> Read {
    return [&s, runs](const TextSink& each) {
      for (size_t i = 0; i < s.parts; ++i) GRAPHDUMP_RETURN_IF_ERROR(runs->Read(i, each));
      return Status::Ok();
    };
  };
  const std::vector<std::tuple<const char*, size_t, Read>> arrays = {
      {"call_count_differences", s.calls_count, in_parts(&*s.calls)},
      {"contributors", s.contributors.size(),
       [&](const TextSink& each) {
         for (uint32_t c : s.ranked) {
           GRAPHDUMP_RETURN_IF_ERROR(ranked(each)(s.contributors[c].brief));
         }
         return Status::Ok();
       }},
      {"differing_graph_inputs", s.inputs_count,
       [&](const TextSink& each) { return s.inputs->Merge(each); }},
      {"differing_sources", s.sources_count,
       [&](const TextSink& each) { return s.sources->Merge(each); }},
      {"kernels", s.kernels_count,
       [&](const TextSink& each) { return s.kernels->Merge(ranked(each)); }},
      {"unpaired", s.unpaired_count, in_parts(&*s.unpaired)},
  };
  for (const auto& [key, count, read] : arrays) j[key] = "";
  std::string rest = internal::JsonText(j, 2), out;
  for (const auto& [key, count, read] : arrays) {
    auto [head, tail] = SplitJsonAt(rest, key);
    out += head;
    rest = std::move(tail);
    GRAPHDUMP_RETURN_IF_ERROR(AppendJsonArray(count, read, write, &out));
  }
  out += rest;
  return write(out);
}

Status WriteCompareCsv(const std::string& path, const SpilledRuns& rows,
                       const std::function<void(std::string_view, std::string*)>& append) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewUserFile(path));
  std::string out = CompareCsvHeader();
  GRAPHDUMP_RETURN_IF_ERROR(rows.Merge([&](std::string_view record) -> Status {
    append(record, &out);
    if (out.size() < kChunk) return Status::Ok();
    Status status = file->Append(out.data(), out.size());
    out.clear();
    return status;
  }));
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(out.data(), out.size()));
  return file->Commit();
}

Status SpilledCompare::WriteCsv(const std::string& path) const {
  return WriteCompareCsv(path, *spill_->rows, [&](std::string_view record, std::string* out) {
    AppendRanked(record, spill_->rank_of, out);
  });
}

}  // namespace graphdump::analysis
