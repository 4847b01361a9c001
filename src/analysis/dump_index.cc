// The dump index (dump_index.h) as a whole: listing a dump's rank directories, indexing them rank
// by rank on several threads (ForEachRank, IndexDump), filters, warnings and skipped files merged
// over ranks, and opening an indexed tensor.
#include "graphdump/analysis/dump_index.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "dump_index_parts.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/file_system.h"

namespace graphdump::analysis {
namespace fs = std::filesystem;
namespace {

bool RankId(const std::string& name, uint32_t* rank) {
  if (name.rfind("rank_", 0) != 0 || !IsNumber(name.substr(5))) return false;
  *rank = static_cast<uint32_t>(std::stoul(name.substr(5)));
  return true;
}


// Whether a rank directory holds a {net_name}/{graph_id} directory (what IndexRank indexes).
// An IOError when a directory on the way cannot be read.
StatusOr<bool> HasGraphs(const fs::path& rank_dir) {
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> nets, SortedChildren(rank_dir));
  for (const fs::path& net : nets) {
    const std::string name = net.filename().string();
    if (name == "graphs" || name == "execution_order" || name[0] == '.') continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(const bool is_directory, IsSubdirectory(net));
    if (!is_directory) continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> graphs, SortedChildren(net));
    for (const fs::path& graph : graphs) {
      if (!IsNumber(graph.filename().string())) continue;
      GRAPHDUMP_ASSIGN_OR_RETURN(const bool graph_is_directory, IsSubdirectory(graph));
      if (graph_is_directory) return true;
    }
  }
  return false;
}

// The mixed-run warning of a rank's first such iteration, and how many it has.
struct MixedRuns {
  std::string first;
  size_t count = 0;
};

MixedRuns MixedRunsOf(const RankEntry& r) {
  MixedRuns m;
  for (const GraphEntry& g : r.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.mixed_runs.empty()) continue;
      if (m.count++ == 0) m.first = it.mixed_runs;
    }
  }
  return m;
}

std::vector<std::string> MixedRunWarnings(const std::vector<MixedRuns>& ranks) {
  std::vector<std::string> warnings;
  size_t mixed = 0;
  for (const MixedRuns& m : ranks) {
    if (m.count == 0) continue;
    if (mixed == 0) warnings.push_back(m.first);
    mixed += m.count;
  }
  if (mixed > 1) {
    warnings.back() += fmt::format(" (and {} more iteration directories)", mixed - 1);
  }
  return warnings;
}

// A rank directory's `.dump_metadata/INCOMPLETE` marker (docs/layout.md: the run did not close
// its dump: it was killed, failed, or is still running) as a warning naming it and saying why,
// its first line (at most 300 bytes, shown escaped); "" when there is none.
std::string IncompleteWarning(const std::string& rank_dir) {
  const std::string marker = (fs::path(rank_dir) / ".dump_metadata" / "INCOMPLETE").string();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(marker, ec))) return "";
  std::string why;
  StatusOr<ReadableFile> file = OpenRegularFile(marker);
  if (file.ok()) {
    Status read = file->Read(0, std::min<uint64_t>(file->size(), 300), &why);
    if (!read.ok()) why = read.message();
  } else {
    why = file.status().message();
  }
  why = why.substr(0, why.find('\n'));
  std::string shown;
  for (unsigned char c : why) {
    shown += c >= 0x20 && c != 0x7f ? std::string(1, static_cast<char>(c))
                                     : fmt::format("\\x{:02x}", c);
  }
  return fmt::format(
      "{} is marked incomplete ({}): the run that wrote it did not close it, so what follows "
      "its last whole files is missing: {}",
      rank_dir, marker, shown.empty() ? std::string("(no reason recorded)") : shown);
}

std::vector<std::string> IncompleteWarnings(const std::vector<std::string>& rank_dirs) {
  std::vector<std::string> warnings;
  for (const std::string& dir : rank_dirs) {
    std::string warning = IncompleteWarning(dir);
    if (!warning.empty()) warnings.push_back(std::move(warning));
  }
  return warnings;
}

// What a filter keeps of an index built at once (GE layout): ranks, iterations, kernels, io.
void FilterIndex(const IndexFilter& filter, DumpIndex* index) {
  if (filter.ranks) {
    std::erase_if(index->ranks, [&](const RankEntry& r) { return !filter.ranks->count(r.rank); });
  }
  for (RankEntry& r : index->ranks) {
    for (GraphEntry& g : r.graphs) {
      if (filter.iterations) {
        std::erase_if(g.iterations, [&](const IterationEntry& it) {
          return !filter.iterations->count(it.iteration);
        });
      }
      for (IterationEntry& it : g.iterations) FilterIteration(filter, &it);
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<MappedNpy>> OpenTensor(const TensorEntry& tensor) {
  if (tensor.in_dump_file && tensor.ascend) {
    return MappedNpy::FromAscendTensor(tensor.path, *tensor.ascend);
  }
  if (tensor.in_dump_file) {
    return MappedNpy::FromAscendDumpFile(tensor.path, tensor.is_input, tensor.slot);
  }
  return MappedNpy::Open(tensor.path);
}

const GraphEntry::IrTraces* GraphEntry::ParsedIr() const {
  if (!ir_) return nullptr;
  std::call_once(ir_->parsed, [&] {
    ir_->traces = ParseIrSourceTraces(ir_->text, execution_order);
    ir_->text = std::string();
    ir_->by_name.reserve(ir_->traces.size());
    for (const auto& [name, trace] : ir_->traces) ir_->by_name.emplace(name, &trace);
    ir_->by_order.reserve(execution_order.size());
    for (const std::string& name : execution_order) {
      const auto it = ir_->by_name.find(name);
      ir_->by_order.push_back(it == ir_->by_name.end() ? nullptr : it->second);
    }
  });
  return ir_.get();
}

const std::map<std::string, std::vector<SourceLocation>>& GraphEntry::source_traces() const {
  static const std::map<std::string, std::vector<SourceLocation>> kNone;
  const IrTraces* ir = ParsedIr();
  return ir ? ir->traces : kNone;
}

std::shared_ptr<const std::vector<SourceLocation>> GraphEntry::SharedSourceTrace(
    const std::string& full_name) const {
  const IrTraces* ir = ParsedIr();
  if (!ir) return nullptr;
  const auto it = ir->by_name.find(full_name);
  if (it == ir->by_name.end()) return nullptr;
  return std::shared_ptr<const std::vector<SourceLocation>>(ir_, it->second);  // shares ir_
}

std::shared_ptr<const std::vector<SourceLocation>> GraphEntry::SharedSourceTrace(
    const std::string& full_name, int64_t order) const {
  const IrTraces* ir = ParsedIr();
  if (!ir) return nullptr;
  const size_t at = static_cast<size_t>(order);
  if (order < 0 || at >= ir->by_order.size() || execution_order[at] != full_name) {
    return SharedSourceTrace(full_name);
  }
  if (!ir->by_order[at]) return nullptr;
  return std::shared_ptr<const std::vector<SourceLocation>>(ir_, ir->by_order[at]);
}

void GraphEntry::SetIrText(std::string text) {
  ir_ = std::make_shared<IrTraces>();
  ir_->text = std::move(text);
}

std::string SourceLineOf(const std::vector<SourceLocation>& trace) {
  const SourceLocation* loc = UserFrame(trace);
  return loc ? loc->file + ":" + std::to_string(loc->line) : "";
}

std::string DumpIndex::SourceLine(const GraphEntry& graph, const std::string& full_name) const {
  return SourceLineOf(SourceTrace(graph, full_name));
}

const std::vector<SourceLocation>& DumpIndex::SourceTrace(const GraphEntry& graph,
                                                         const std::string& full_name) const {
  static const std::vector<SourceLocation> kNone;
  const auto trace = graph.SharedSourceTrace(full_name);  // the graph keeps it alive
  return trace ? *trace : kNone;
}

StatusOr<DumpRanks> ListDumpRanks(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::NotFound(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) {
    return Status::InvalidArgument(dir +
                                   ": not a dump directory (it is a file; expected a "
                                   "directory holding rank_{id}/ subdirectories)");
  }
  DumpRanks out;
  out.root = dir;
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  uint32_t rank = 0;
  if (RankId(path.filename().string(), &rank)) {
    out.dirs.emplace_back(path.string(), rank);
  } else {
    GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> children, SortedChildren(path));
    for (const fs::path& child : children) {
      if (!RankId(child.filename().string(), &rank)) continue;
      GRAPHDUMP_ASSIGN_OR_RETURN(const bool is_directory, IsSubdirectory(child));
      if (is_directory) out.dirs.emplace_back(child.string(), rank);
    }
    std::stable_sort(out.dirs.begin(), out.dirs.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
  }
  for (const auto& [rank_dir, id] : out.dirs) {
    GRAPHDUMP_ASSIGN_OR_RETURN(const bool has_graphs, HasGraphs(rank_dir));
    if (has_graphs) return out;
  }
  // No {net_name}/{graph_id} below: a GE-layout dump or `graphdump convert` output, else not a
  // dump at all.
  DumpIndex index;
  index.root = dir;
  for (const auto& [rank_dir, id] : out.dirs) {
    GRAPHDUMP_ASSIGN_OR_RETURN(RankEntry r,
                               IndexRank(rank_dir, id, IndexFilter(), &index.skipped));
    index.ranks.push_back(std::move(r));
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(const bool ascend, IndexAscendLayout(path.string(), &index));
  if (ascend) {
    out.dirs.clear();
    out.whole = std::move(index);
    return out;
  }
  return Status::InvalidArgument(
      dir +
      ": not a dump directory: expected rank_{id}/{net_name}/{graph_id}/{iteration}/ "
      "below it (docs/layout.md), found " +
      (out.dirs.empty() ? std::string("no rank_{id} directory")
                        : std::string("no {net_name}/{graph_id} directory")));
}

StatusOr<StreamedDump> ForEachRank(DumpRanks ranks, const IndexFilter& filter, int threads,
                                   const std::string& progress,
                                   const std::function<void(size_t, DumpIndex&)>& each) {
  StreamedDump out;
  out.root = ranks.root;
  if (ranks.whole) {
    FilterIndex(filter, &*ranks.whole);
    out.skipped = std::move(ranks.whole->skipped);
    out.warnings = std::move(ranks.whole->warnings);
    out.ranks = ranks.whole->ranks.size();
    for (size_t i = 0; i < ranks.whole->ranks.size(); ++i) {
      DumpIndex one;
      one.root = ranks.root;
      one.ranks.push_back(std::move(ranks.whole->ranks[i]));
      each(i, one);
    }
    return out;
  }
  const size_t n = ranks.dirs.size();
  std::vector<std::vector<Skipped>> skipped(n);
  std::vector<MixedRuns> mixed(n);
  std::vector<size_t> kept;  // positions of the ranks the filter keeps (the progress counts them)
  for (size_t i = 0; i < n; ++i) {
    if (!filter.ranks || filter.ranks->count(ranks.dirs[i].second)) kept.push_back(i);
  }
  // The error of the first rank (in rank order) that could not be read; no rank after one that
  // failed is started.
  std::mutex mu;
  std::optional<std::pair<size_t, Status>> failed;
  ParallelFor(kept.size(), std::max(1, threads), progress, [&](size_t k) {
    const size_t i = kept[k];
    {
      std::lock_guard<std::mutex> lock(mu);
      if (failed && failed->first < k) return;
    }
    const auto& [dir, rank] = ranks.dirs[i];
    DumpIndex one;
    one.root = ranks.root;
    StatusOr<RankEntry> entry = IndexRank(dir, rank, filter, &one.skipped);
    if (!entry.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed || k < failed->first) failed.emplace(k, entry.status());
      return;
    }
    one.ranks.push_back(std::move(entry).value());
    skipped[i] = one.skipped;
    mixed[i] = MixedRunsOf(one.ranks.back());
    each(i, one);
  });
  if (failed) return failed->second;
  out.ranks = kept.size();
  // Skipped files in the order of the rank directories' names, as IndexDump lists them.
  std::vector<size_t> by_name(n);
  for (size_t i = 0; i < n; ++i) by_name[i] = i;
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](size_t a, size_t b) { return ranks.dirs[a].first < ranks.dirs[b].first; });
  for (size_t i : by_name) {
    for (Skipped& s : skipped[i]) out.skipped.push_back(std::move(s));
  }
  out.warnings = MixedRunWarnings(mixed);
  std::vector<std::string> kept_dirs;
  for (size_t i : kept) kept_dirs.push_back(ranks.dirs[i].first);
  for (std::string& w : IncompleteWarnings(kept_dirs)) out.warnings.push_back(std::move(w));
  return out;
}

Status CheckRanks(const DumpRanks& ranks, const IndexFilter& filter) {
  if (!filter.ranks) return Status::Ok();
  std::set<uint32_t> found;
  for (size_t i = 0; i < ranks.size(); ++i) found.insert(ranks.rank(i));
  for (uint32_t id : *filter.ranks) {
    if (found.count(id)) continue;
    return Status::InvalidArgument(fmt::format(
        "ranks: rank {} is not in {} (ranks found: {})", id, ranks.root,
        found.empty() ? std::string("none") : fmt::format("{}", fmt::join(found, ", "))));
  }
  return Status::Ok();
}

StatusOr<DumpIndex> IndexDump(const std::string& dir, const IndexFilter& filter, bool progress) {
  GRAPHDUMP_ASSIGN_OR_RETURN(DumpRanks ranks, ListDumpRanks(dir));
  GRAPHDUMP_RETURN_IF_ERROR(CheckRanks(ranks, filter));
  std::vector<RankEntry> kept(ranks.size());
  std::vector<bool> have(ranks.size());
  GRAPHDUMP_ASSIGN_OR_RETURN(
      StreamedDump streamed,
      ForEachRank(std::move(ranks), filter, DefaultThreads(), progress ? "indexing ranks" : "",
                  [&](size_t i, DumpIndex& one) {
                    kept[i] = std::move(one.ranks.front());
                    have[i] = true;
                  }));
  DumpIndex index;
  index.root = dir;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (have[i]) index.ranks.push_back(std::move(kept[i]));
  }
  index.skipped = std::move(streamed.skipped);
  index.warnings = std::move(streamed.warnings);
  return index;
}

StatusOr<DumpIndex> IndexDump(const std::string& dir, bool progress) {
  return IndexDump(dir, IndexFilter(), progress);
}

}  // namespace graphdump::analysis
