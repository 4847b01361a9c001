// The distributed runs of watch and compare --ranks (analysis_distributed.h): each process
// indexes the ranks assigned to it, analyses them, and sends the encoded results; process 0
// merges them into what one process would have found.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis_distributed.h"
#include "commands.h"
#include "distributed_commands.h"
#include "graphdump/analysis/result_codec.h"

namespace graphdump::tools {
namespace {

using Json = nlohmann::json;

// A rank directory's index, rooted where a whole-dump index would be; a rank without graphs is
// an empty rank (a whole-dump index holds it too).
StatusOr<analysis::DumpIndex> IndexRank(const std::string& dir, uint32_t rank) {
  const std::string path =
      (std::filesystem::path(dir) / ("rank_" + std::to_string(rank))).lexically_normal().string();
  auto index = analysis::IndexDump(path, false);
  if (!index.ok() && index.status().code() != StatusCode::kInvalidArgument) return index.status();
  analysis::DumpIndex out;
  if (index.ok()) out = std::move(index).value();
  if (out.ranks.empty()) out.ranks.push_back({rank, path, {}});
  out.root = dir;
  return out;
}

Json Binary(const std::string& bytes) {
  return Json::binary(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

std::string Bytes(const Json& j) {
  const auto& b = j.get_binary();
  return std::string(b.begin(), b.end());
}

// Exchanges this process's frame; on process 0 returns every frame, decoded, after telling
// stderr the first error one holds (*exit_code set). Elsewhere: nullopt, *exit_code 0.
std::optional<std::vector<Json>> Exchange(AnalysisJob& job, const std::string& command,
                                          const Json& mine, int* exit_code) {
  const std::vector<uint8_t> packed = Json::to_msgpack(mine);
  auto all = job.AllGather(std::string(packed.begin(), packed.end()));
  if (!all.ok()) {
    fmt::print(stderr, "graphdump {}: error: {}\n", command, all.status().message());
    *exit_code = kExitFailure;
    return std::nullopt;
  }
  *exit_code = kExitOk;
  if (job.rank() != 0) return std::nullopt;
  std::vector<Json> frames;
  for (uint32_t process = 0; process < all->size(); ++process) {
    // The rendezvous checked that every process runs this command: a frame that does not read
    // as its results is a fault, told and not merged.
    try {
      frames.push_back(Json::from_msgpack((*all)[process]));
      const Json& f = frames.back();
      const std::string error = f.at("error").get<std::string>();
      const int code = f.at("code").get<int>();
      (void)f.at("parts").size();
      (void)f.at("skipped").size();
      if (*exit_code == kExitOk && !error.empty()) {
        fmt::print(stderr, "graphdump {}: error: {}\n", command, error);
        *exit_code = code;
      }
    } catch (const Json::exception& e) {
      fmt::print(stderr, "graphdump {}: error: the results of process {} cannot be read: {}\n",
                 command, process, e.what());
      *exit_code = kExitFailure;
      return std::nullopt;
    }
  }
  if (*exit_code != kExitOk) return std::nullopt;
  return frames;
}

Json ErrorFrame(const Status& s) {
  return {{"error", s.message()},
          {"code", s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument
                       ? kExitUsage
                       : kExitFailure},
          {"parts", Json::array()},
          {"skipped", Json::array()}};
}

// The job and the ranks each process sees; null after an error (told by process 0 when every
// process meets it).
std::unique_ptr<AnalysisJob> Start(const std::string& command, const JobCommand& mine,
                                   std::map<uint32_t, std::vector<uint32_t>>* seen,
                                   int* exit_code) {
  std::unique_ptr<AnalysisJob> job = AnalysisJob::Join(command, exit_code);
  if (!job) return nullptr;
  const std::string& dir = mine.dir;
  bool shared = false;
  auto found = job->Rendezvous(mine, &shared);
  if (!found.ok()) {
    if (!shared || job->rank() == 0) {
      fmt::print(stderr, "graphdump {}: error: {}\n", command, found.status().message());
    }
    *exit_code = found.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    return nullptr;
  }
  if (found->empty()) {
    if (job->rank() == 0) {
      fmt::print(stderr,
                 "graphdump {}: error: {}: no process of the job sees a rank_{{id}} directory "
                 "in it (the distributed mode reads a dump root's rank_{{id}}/ directories, "
                 "docs/scale.md)\n",
                 command, dir);
    }
    *exit_code = kExitUsage;
    return nullptr;
  }
  *seen = std::move(found).value();
  return job;
}

}  // namespace

std::optional<analysis::WatchResult> DistributedWatch(const JobCommand& command,
                                                      const std::vector<analysis::WatchCheck>& checks,
                                                      const analysis::WatchOptions& options,
                                                      int* exit_code) {
  const std::string& dir = command.dir;
  std::map<uint32_t, std::vector<uint32_t>> seen;
  std::unique_ptr<AnalysisJob> job = Start("watch", command, &seen, exit_code);
  if (!job) return std::nullopt;
  Json mine = {{"error", ""}, {"code", 0}, {"parts", Json::array()}, {"skipped", Json::array()}};
  for (const auto& [rank, process] : AssignRanks(seen)) {
    if (process != job->rank()) continue;
    auto index = IndexRank(dir, rank);
    if (!index.ok()) {
      mine = ErrorFrame(index.status());
      break;
    }
    for (const std::string& warning : index->warnings) {
      fmt::print(stderr, "graphdump watch: warning: {}\n", warning);
    }
    // Every hit is sent: the processes' parts are merged and sorted as one (the codec carries
    // neither dropped counts nor spreads).
    analysis::WatchOptions whole = options;
    whole.keep_hits = 0;
    const analysis::WatchResult part = analysis::RunWatch(*index, checks, whole);
    mine["parts"].push_back({rank, Binary(analysis::EncodeWatchResult(part))});
  }
  auto frames = Exchange(*job, "watch", mine, exit_code);
  if (!frames) return std::nullopt;
  std::map<uint32_t, analysis::WatchResult> parts;
  for (const Json& f : *frames) {
    for (const Json& p : f["parts"]) {
      auto decoded = analysis::DecodeWatchResult(Bytes(p[1]));
      if (!decoded.ok()) {
        fmt::print(stderr, "graphdump watch: error: {}\n", decoded.status().message());
        *exit_code = kExitFailure;
        return std::nullopt;
      }
      parts[p[0].get<uint32_t>()] = std::move(decoded).value();
    }
  }
  // Skipped files as one index lists them: by rank directory name.
  std::vector<analysis::Skipped> skipped;
  std::vector<uint32_t> ranks;
  for (const auto& [rank, part] : parts) ranks.push_back(rank);
  for (uint32_t rank : ByDirectoryName(ranks)) {
    skipped.insert(skipped.end(), parts[rank].skipped.begin(), parts[rank].skipped.end());
  }
  std::vector<analysis::WatchResult> in_order;
  for (auto& [rank, part] : parts) in_order.push_back(std::move(part));
  analysis::WatchResult merged = analysis::MergeWatchResults(std::move(in_order));
  merged.skipped = std::move(skipped);
  return merged;
}

std::optional<analysis::RankCompareResult> DistributedCompareRanks(
    const JobCommand& command, const analysis::RankCompareOptions& options, int* exit_code) {
  const std::string& dir = command.dir;
  std::map<uint32_t, std::vector<uint32_t>> seen;
  std::unique_ptr<AnalysisJob> job = Start("compare", command, &seen, exit_code);
  if (!job) return std::nullopt;
  std::vector<uint32_t> available;
  for (const auto& [rank, processes] : seen) available.push_back(rank);
  auto ids = analysis::RanksToCompare(available, options.ranks, dir);
  if (!ids.ok()) {
    if (job->rank() == 0) fmt::print(stderr, "graphdump compare: error: {}\n", ids.status().message());
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  const uint32_t reference = (*ids)[0];
  const std::vector<uint32_t> compared(ids->begin() + 1, ids->end());
  const std::map<uint32_t, uint32_t> owner = AssignRanks(seen, compared, reference);
  for (uint32_t rank : compared) {
    if (owner.count(rank)) continue;
    if (job->rank() == 0) {
      fmt::print(stderr,
                 "graphdump compare: error: --ranks: no process sees both rank_{} and the "
                 "reference rank_{} in {}: each rank is compared where its directory lies, so "
                 "the reference rank's directory must be there too (copy it to every node)\n",
                 rank, reference, dir);
    }
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  Json mine = {{"error", ""}, {"code", 0}, {"parts", Json::array()}, {"skipped", Json::array()}};
  std::optional<analysis::DumpIndex> reference_index;
  analysis::CompareOptions each = options.compare;
  each.progress = false;
  for (const auto& [rank, process] : owner) {
    if (process != job->rank()) continue;
    auto index = IndexRank(dir, rank);
    const bool compare =
        index.ok() && std::find(compared.begin(), compared.end(), rank) != compared.end();
    if (compare && !reference_index) {
      auto r = IndexRank(dir, reference);
      if (r.ok()) {
        reference_index = std::move(r).value();
      } else {
        index = r.status();
      }
    }
    if (!index.ok()) {
      mine = ErrorFrame(index.status());
      break;
    }
    for (const std::string& warning : index->warnings) {
      fmt::print(stderr, "graphdump compare: warning: {}\n", warning);
    }
    mine["skipped"].push_back({rank, Binary(analysis::EncodeSkipped(index->skipped))});
    if (!compare) continue;
    const analysis::CompareResult part = analysis::CompareRankPair(
        *index, index->ranks[0], *reference_index, reference_index->ranks[0], each);
    mine["parts"].push_back({rank, Binary(analysis::EncodeCompareResult(part))});
  }
  auto frames = Exchange(*job, "compare", mine, exit_code);
  if (!frames) return std::nullopt;
  std::map<uint32_t, std::vector<analysis::Skipped>> skipped_by_rank;
  std::map<uint32_t, analysis::CompareResult> parts;
  for (const Json& f : *frames) {
    for (const Json& s : f["skipped"]) {
      auto decoded = analysis::DecodeSkipped(Bytes(s[1]));
      if (decoded.ok()) skipped_by_rank[s[0].get<uint32_t>()] = std::move(decoded).value();
    }
    for (const Json& p : f["parts"]) {
      auto decoded = analysis::DecodeCompareResult(Bytes(p[1]));
      if (!decoded.ok()) {
        fmt::print(stderr, "graphdump compare: error: {}\n", decoded.status().message());
        *exit_code = kExitFailure;
        return std::nullopt;
      }
      parts[p[0].get<uint32_t>()] = std::move(decoded).value();
    }
  }
  std::vector<analysis::Skipped> skipped;
  for (uint32_t rank : ByDirectoryName(available)) {
    skipped.insert(skipped.end(), skipped_by_rank[rank].begin(), skipped_by_rank[rank].end());
  }
  std::vector<analysis::CompareResult> in_order;
  for (uint32_t rank : compared) in_order.push_back(std::move(parts[rank]));
  return analysis::MergeRankComparisons(reference, compared, std::move(skipped),
                                        std::move(in_order));
}

}  // namespace graphdump::tools
