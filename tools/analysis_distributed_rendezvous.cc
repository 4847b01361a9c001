// The rendezvous of a distributed analysis (analysis_distributed.h, AnalysisJob::Rendezvous):
// every process tells the others what it was asked and what its DIR holds, so that processes
// asked different things (another command, DIR or --check, or a dump another graphdump wrote)
// stop before their parts are merged into one answer.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis_distributed.h"
#include "graphdump/file_system.h"

namespace graphdump::tools {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// Marks a frame as this rendezvous': a frame without it comes from another program (or another
// version of graphdump) answering the same collective.
constexpr char kProtocol[] = "graphdump distributed analysis rendezvous 1";

constexpr char kSameCommand[] =
    ": every process of the job must be given the same command, on dumps written by the same "
    "graphdump (docs/scale.md)";

// What one process told at the rendezvous.
struct Told {
  JobCommand command;
  std::vector<uint32_t> ranks;  // the rank_{id} directories of its DIR
  std::string error;            // why DIR could not be listed; empty when it could
  std::string dump;             // what wrote its lowest rank (DumpKind); empty without ranks
  std::string dump_dir;         // that rank's directory
};

// "rank_{id}" with a decimal id that fits uint32_t.
bool RankDirectoryId(const std::string& name, uint32_t* id) {
  if (name.rfind("rank_", 0) != 0 || name.size() == 5 || name.size() > 15 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos) {
    return false;
  }
  const unsigned long long value = std::stoull(name.substr(5));
  if (value > UINT32_MAX) return false;
  *id = static_cast<uint32_t>(value);
  return true;
}

bool Vanished(const std::error_code& ec) {
  return ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
}

// What wrote the dump in `rank_dir`, as a phrase: "a dump of graphdump 0.1.0" (its
// .dump_metadata/config.json), else "a dump without graphdump_version (MindSpore's)".
std::string DumpKind(const fs::path& rank_dir) {
  const fs::path config = rank_dir / ".dump_metadata" / "config.json";
  std::error_code ec;
  const fs::file_status status = fs::status(config, ec);
  if (ec && !Vanished(ec)) {
    return fmt::format("a dump whose {} cannot be looked at ({})", config.string(), ec.message());
  }
  if (fs::exists(status)) {
    StatusOr<std::string> text = ReadRegularFile(config.string());
    if (!text.ok()) return "a dump whose " + text.status().message();
    const Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("graphdump_version") && j["graphdump_version"].is_string()) {
      return "a dump of graphdump " + j["graphdump_version"].get<std::string>();
    }
  }
  return "a dump without graphdump_version (MindSpore's)";
}

// This process's part of the rendezvous.
Told Look(const JobCommand& mine) {
  Told told;
  told.command = mine;
  std::error_code ec;
  for (fs::directory_iterator it(mine.dir, ec), end; !ec && it != end; it.increment(ec)) {
    uint32_t id = 0;
    if (!RankDirectoryId(it->path().filename().string(), &id)) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) told.ranks.push_back(id);
  }
  // A DIR this node does not have: the node reads no rank. Anything else is an error.
  if (ec && !Vanished(ec)) {
    told.error = fmt::format("{}: cannot read the directory: {}", mine.dir, ec.message());
    told.ranks.clear();
  }
  std::sort(told.ranks.begin(), told.ranks.end());
  if (!told.ranks.empty()) {
    told.dump_dir = (fs::path(mine.dir) / ("rank_" + std::to_string(told.ranks.front()))).string();
    told.dump = DumpKind(told.dump_dir);
  }
  return told;
}

std::string Encode(const Told& told) {
  Json options = Json::array();
  for (const auto& [name, value] : told.command.options) options.push_back({name, value});
  const Json j = {{"protocol", kProtocol},          {"command", told.command.command},
                  {"dir", told.command.dir},         {"options", options},
                  {"ranks", told.ranks},             {"error", told.error},
                  {"dump", told.dump},               {"dump_dir", told.dump_dir}};
  const std::vector<uint8_t> packed = Json::to_msgpack(j);
  return std::string(packed.begin(), packed.end());
}

StatusOr<Told> Decode(const std::string& bytes, uint32_t process) {
  try {
    const Json j = Json::from_msgpack(bytes);
    if (j.is_object() && j.value("protocol", "") == kProtocol) {
      Told told;
      told.command.command = j.at("command").get<std::string>();
      told.command.dir = j.at("dir").get<std::string>();
      for (const Json& option : j.at("options")) {
        told.command.options.emplace_back(option.at(0).get<std::string>(),
                                          option.at(1).get<std::string>());
      }
      told.ranks = j.at("ranks").get<std::vector<uint32_t>>();
      told.error = j.at("error").get<std::string>();
      told.dump = j.at("dump").get<std::string>();
      told.dump_dir = j.at("dump_dir").get<std::string>();
      return told;
    }
  } catch (const Json::exception&) {
  }
  return Status::InvalidArgument(fmt::format(
      "process {} did not answer the rendezvous as this graphdump does (another program, or "
      "another version of graphdump){}",
      process, kSameCommand));
}

// The first difference between what process `p` and process 0 were asked, as a phrase; empty
// when none.
std::string CommandDifference(const Told& p, uint32_t process, const Told& zero) {
  const JobCommand &a = p.command, &b = zero.command;
  if (a.command != b.command) {
    return fmt::format("process {} runs '{}', process 0 runs '{}'", process, a.command, b.command);
  }
  if (a.dir != b.dir) {
    return fmt::format("process {} reads DIR '{}', process 0 DIR '{}'", process, a.dir, b.dir);
  }
  for (size_t i = 0; i < std::max(a.options.size(), b.options.size()); ++i) {
    const std::pair<std::string, std::string> none;
    const auto& mine = i < a.options.size() ? a.options[i] : none;
    const auto& theirs = i < b.options.size() ? b.options[i] : none;
    if (mine != theirs) {
      const std::string& name = mine.first.empty() ? theirs.first : mine.first;
      return fmt::format("process {} was given {} '{}', process 0 {} '{}'", process, name,
                         mine.second, name, theirs.second);
    }
  }
  return "";
}

}  // namespace

StatusOr<std::map<uint32_t, std::vector<uint32_t>>> AnalysisJob::Rendezvous(
    const JobCommand& mine, bool* shared) {
  *shared = false;
  auto all = AllGather(Encode(Look(mine)));
  if (!all.ok()) return all.status();
  *shared = true;
  std::vector<Told> told;
  for (uint32_t process = 0; process < all->size(); ++process) {
    GRAPHDUMP_ASSIGN_OR_RETURN(Told t, Decode((*all)[process], process));
    told.push_back(std::move(t));
  }
  for (uint32_t process = 1; process < told.size(); ++process) {
    const std::string difference = CommandDifference(told[process], process, told[0]);
    if (!difference.empty()) return Status::InvalidArgument(difference + kSameCommand);
  }
  for (uint32_t process = 0; process < told.size(); ++process) {
    if (!told[process].error.empty()) {
      return Status::IOError(fmt::format("process {}: {}", process, told[process].error));
    }
  }
  const Told* reference = nullptr;
  uint32_t reference_process = 0;
  for (uint32_t process = 0; process < told.size(); ++process) {
    const Told& t = told[process];
    if (t.dump.empty()) continue;
    if (!reference) {
      reference = &t;
      reference_process = process;
    } else if (t.dump != reference->dump) {
      return Status::InvalidArgument(fmt::format("process {} reads {} in {}, process {} {} in {}{}",
                                                 process, t.dump, t.dump_dir, reference_process,
                                                 reference->dump, reference->dump_dir,
                                                 kSameCommand));
    }
  }
  std::map<uint32_t, std::vector<uint32_t>> seen;
  for (uint32_t process = 0; process < told.size(); ++process) {
    for (uint32_t rank : told[process].ranks) seen[rank].push_back(process);
  }
  return seen;
}

}  // namespace graphdump::tools
