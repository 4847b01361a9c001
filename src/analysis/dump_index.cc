// Indexing a dump directory from its file names and text files (docs/layout.md), rank by rank.
#include "graphdump/analysis/dump_index.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/ascend_index.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/layout.h"

namespace graphdump::analysis {
namespace fs = std::filesystem;
namespace {

bool IsNumber(const std::string& s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> SplitDots(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// The text of `path`, a regular file (a FIFO is not waited on); "" and a `skipped` entry when it
// cannot be read.
std::string ReadText(const fs::path& path, std::vector<Skipped>* skipped) {
  StatusOr<std::string> text = ReadRegularFile(path.string());
  if (text.ok()) return std::move(*text);
  skipped->push_back({path.string(), text.status().message()});
  return "";
}

std::vector<std::string> ReadLines(const fs::path& path, std::vector<Skipped>* skipped) {
  std::vector<std::string> lines;
  std::istringstream in(ReadText(path, skipped));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::vector<fs::path> SortedChildren(const fs::path& dir) {
  std::vector<fs::path> children;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    children.push_back(it->path());
  }
  std::sort(children.begin(), children.end());
  return children;
}

// mapping.csv: "{number}.npy,{original name}" per line.
std::map<std::string, std::string> ReadMapping(const fs::path& dir, std::vector<Skipped>* skipped) {
  const fs::path path = dir / "mapping.csv";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return {};
  return ParseMappingCsv(ReadText(path, skipped));
}

struct GraphContext {
  // Written by graphdump, which writes one run per directory: two files of one tensor in an
  // iteration are two calls of a module in that iteration (graphdump python), not two runs.
  bool one_run = false;
  // file-form kernel name -> (full name, execution order position)
  std::unordered_map<std::string, std::pair<std::string, int64_t>> by_file_name;
};

using KernelMap = std::map<std::pair<std::string, std::string>, KernelEntry>;  // (type, name)

// Drops the kernels and tensors of `it` that `filter` leaves out (calls keep their numbers).
void FilterIteration(const IndexFilter& filter, IterationEntry* it) {
  if (!filter.kernels && !filter.is_input) return;
  std::erase_if(it->kernels, [&](KernelEntry& k) {
    if (!filter.Keeps(k)) return true;
    if (filter.is_input) {
      std::erase_if(k.tensors, [&](const TensorEntry& t) { return t.is_input != *filter.is_input; });
    }
    return k.tensors.empty();
  });
}

// The tensors of an Ascend dump file (file_format "bin" in MindSpore's layout); `name` is the
// name the file stands for (its own, or mapping.csv's original).
void IndexDumpFile(const fs::path& file, const std::string& name, KernelMap* kernels,
                   std::vector<Skipped>* skipped) {
  AscendIndexEntry parsed;
  if (!ParseAscendBasename(name, &parsed)) return;
  StatusOr<AscendDumpFile> header = ReadAscendDumpHeader(file.string());
  if (!header.ok()) {
    skipped->push_back({file.string(), header.status().message()});
    return;
  }
  KernelEntry& k = (*kernels)[{parsed.op_type, parsed.op_name}];
  k.op_type = parsed.op_type;
  k.op_name = parsed.op_name;
  std::error_code ec;
  uint64_t file_bytes = fs::file_size(file, ec);  // counted once, with the first tensor
  for (const auto* list : {&header->inputs, &header->outputs}) {
    for (const AscendTensor& t : *list) {
      if (t.absent()) continue;
      TensorEntry tensor;
      tensor.is_input = t.is_input;
      tensor.slot = static_cast<uint32_t>(t.index);
      tensor.format = kDefaultFormat;
      tensor.dtype = AscendDataTypeToDType(t.data_type);
      tensor.dtype_name = tensor.dtype ? std::string(DTypeName(*tensor.dtype))
                                       : std::string(AscendDataTypeName(t.data_type));
      tensor.path = file.string();
      tensor.in_dump_file = true;
      tensor.ascend = t;
      tensor.timestamp = parsed.timestamp;
      tensor.file_bytes = std::exchange(file_bytes, 0);
      k.tensors.push_back(std::move(tensor));
    }
  }
}

IterationEntry IndexIteration(const fs::path& dir, int64_t iteration, const GraphContext& ctx,
                              std::vector<Skipped>* skipped) {
  IterationEntry entry;
  entry.iteration = iteration;
  entry.dir = dir.string();
  const auto mapping = ReadMapping(dir, skipped);
  KernelMap kernels;
  for (const fs::path& file : SortedChildren(dir)) {
    std::string name = file.filename().string();
    if (auto it = mapping.find(name); it != mapping.end()) name = it->second;
    if (file.extension() != ".npy") {
      // file_format "bin": one Ascend dump file per kernel, holding its tensors.
      if (LooksLikeAscendDumpName(name)) IndexDumpFile(file, name, &kernels, skipped);
      continue;
    }
    std::string op_type, op_name;
    TensorEntry tensor;
    if (!ParseDumpFileName(name, &op_type, &op_name, &tensor)) {
      skipped->push_back({file.string(),
                          "file name does not follow {op_type}.{op_name}.{task}.{stream}."
                          "{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy"});
      continue;
    }
    tensor.path = file.string();
    std::error_code ec;
    tensor.file_bytes = fs::file_size(file, ec);
    KernelEntry& k = kernels[{op_type, op_name}];
    k.op_type = op_type;
    k.op_name = op_name;
    k.tensors.push_back(std::move(tensor));
  }
  std::map<std::pair<std::string, std::string>, std::vector<StatisticRow>> rows;
  const fs::path csv = dir / "statistic.csv";
  if (fs::exists(csv)) {
    auto parsed = ParseStatisticCsv(csv.string());
    if (!parsed.ok()) {
      skipped->push_back({csv.string(), parsed.status().message()});
    } else {
      for (StatisticRow& row : *parsed) {
        // Some writers keep the full name's '/' in the row; files always use the sanitized form.
        row.op_name = FileKernelName(row.op_name);
        KernelEntry& k = kernels[{row.op_type, row.op_name}];
        k.op_type = row.op_type;
        k.op_name = row.op_name;
        rows[{row.op_type, row.op_name}].push_back(std::move(row));
      }
    }
  }
  for (auto& [key, k] : kernels) {
    k.is_parameter = k.op_type == "Parameter";
    if (auto it = ctx.by_file_name.find(k.op_name);
        it != ctx.by_file_name.end() && !k.is_parameter) {
      k.full_name = it->second.first;
      k.order = it->second.second;
    } else {
      k.full_name = k.op_name;
    }
    auto kernel_rows = rows.find(key);
    std::vector<KernelEntry> calls =
        SplitCalls(std::move(k), kernel_rows == rows.end() ? std::vector<StatisticRow>()
                                                           : std::move(kernel_rows->second));
    // MindSpore runs each kernel of a graph once per iteration: there, a second call is a
    // second run dumped into the same path.
    if (!ctx.one_run && calls.size() > 1 && entry.mixed_runs.empty()) {
      const TensorEntry& t = calls[1].tensors.front();
      entry.mixed_runs = fmt::format(
          "{} holds files of more than one run ({} has two files for {} {}): results mix "
          "runs; dump each run into its own directory (docs/layout.md)",
          dir.string(), calls[1].op_name, t.is_input ? "input" : "output", t.slot);
    }
    for (KernelEntry& call : calls) entry.kernels.push_back(std::move(call));
  }
  // Parameters first, then by call: the execution order, then kernels the order does not list,
  // by time.
  std::sort(entry.kernels.begin(), entry.kernels.end(),
            [](const KernelEntry& a, const KernelEntry& b) {
              auto key = [](const KernelEntry& k) {
                return std::make_tuple(!k.is_parameter, k.call, k.order < 0, k.order,
                                       k.first_timestamp, k.op_name);
              };
              return key(a) < key(b);
            });
  return entry;
}

GraphEntry IndexGraph(const fs::path& rank_dir, const std::string& net, const fs::path& dir,
                      uint32_t graph_id, const IndexFilter& filter, std::vector<Skipped>* skipped) {
  GraphEntry graph;
  graph.graph_id = graph_id;
  graph.net_name = net;
  const std::string id = std::to_string(graph_id);
  const fs::path order_csv =
      rank_dir / "execution_order" / ("ms_execution_order_graph_" + id + ".csv");
  if (fs::exists(order_csv)) {
    for (const std::string& line : ReadLines(order_csv, skipped)) {
      if (line == "NodeExecutionOrder-FullNameWithScope") continue;
      graph.execution_order.push_back(line);
    }
  }
  GraphContext ctx;
  std::error_code ec;
  const fs::path meta = rank_dir / ".dump_metadata" / "config.json";
  ctx.one_run = fs::is_regular_file(meta, ec) &&
                ReadText(meta, skipped).find("\"graphdump_version\"") != std::string::npos;
  for (size_t i = 0; i < graph.execution_order.size(); ++i) {
    ctx.by_file_name.emplace(FileKernelName(graph.execution_order[i]),
                             std::make_pair(graph.execution_order[i], static_cast<int64_t>(i)));
  }
  const fs::path ir = rank_dir / "graphs" / ("ms_output_trace_code_graph_" + id + ".ir");
  if (fs::exists(ir)) {
    graph.ir_path = ir.string();
    graph.source_traces = ParseIrSourceTraces(ReadText(ir, skipped), graph.execution_order);
  }
  // graphdump's graph files record each kernel's arguments (docs/graph-proto.md).
  const fs::path pb = rank_dir / "graphs" / ("ms_output_trace_code_graph_" + id + ".pb");
  if (fs::is_regular_file(pb, ec)) {
    StatusOr<GraphInfo> info = ParseGraphProto(ReadText(pb, skipped), pb.string());
    if (info.ok()) {
      graph.intended_infinities = IntendedInfinities(*info);
    } else {
      skipped->push_back({pb.string(), info.status().message()});
    }
  }
  IterationEntry constants;
  bool have_constants = false;
  for (const fs::path& child : SortedChildren(dir)) {
    if (!fs::is_directory(child)) continue;
    const std::string name = child.filename().string();
    const bool numbered = IsNumber(name);
    if (!numbered && name != "constants") continue;
    const int64_t iteration = numbered ? std::stoll(name) : -1;
    if (filter.iterations && !filter.iterations->count(iteration)) continue;
    IterationEntry entry = IndexIteration(child, iteration, ctx, skipped);
    // Without an execution order, kernels are numbered below over every kept kernel.
    if (!graph.execution_order.empty()) FilterIteration(filter, &entry);
    if (numbered) {
      graph.iterations.push_back(std::move(entry));
    } else {
      constants = std::move(entry);
      have_constants = true;
    }
  }
  std::sort(
      graph.iterations.begin(), graph.iterations.end(),
      [](const IterationEntry& a, const IterationEntry& b) { return a.iteration < b.iteration; });
  // Without an execution order, number kernels by their position in the first iteration
  // (timestamps give the run order) so that compare can still pair by order.
  if (graph.execution_order.empty()) {
    std::unordered_map<std::string, int64_t> positions;
    for (IterationEntry& it : graph.iterations) {
      for (KernelEntry& k : it.kernels) {
        if (k.is_parameter) continue;
        auto [pos, inserted] = positions.emplace(k.op_name, positions.size());
        k.order = pos->second;
      }
    }
    for (IterationEntry& it : graph.iterations) FilterIteration(filter, &it);
    FilterIteration(filter, &constants);
  }
  if (have_constants) graph.iterations.push_back(std::move(constants));
  return graph;
}

RankEntry IndexRank(const fs::path& dir, uint32_t rank, const IndexFilter& filter,
                    std::vector<Skipped>* skipped) {
  RankEntry entry;
  entry.rank = rank;
  entry.dir = dir.string();
  for (const fs::path& net : SortedChildren(dir)) {
    const std::string name = net.filename().string();
    if (!fs::is_directory(net) || name == "graphs" || name == "execution_order" || name[0] == '.') {
      continue;
    }
    for (const fs::path& graph : SortedChildren(net)) {
      const std::string id = graph.filename().string();
      if (fs::is_directory(graph) && IsNumber(id)) {
        entry.graphs.push_back(IndexGraph(dir, name, graph, std::stoul(id), filter, skipped));
      }
    }
  }
  std::sort(entry.graphs.begin(), entry.graphs.end(),
            [](const GraphEntry& a, const GraphEntry& b) { return a.graph_id < b.graph_id; });
  return entry;
}

bool RankId(const std::string& name, uint32_t* rank) {
  if (name.rfind("rank_", 0) != 0 || !IsNumber(name.substr(5))) return false;
  *rank = static_cast<uint32_t>(std::stoul(name.substr(5)));
  return true;
}

// GE-layout dumps and `graphdump convert` output (docs/ascend.md) in the index's terms. Returns
// false when `dir` holds neither.
bool IndexAscendLayout(const std::string& dir, DumpIndex* index) {
  StatusOr<AscendIndex> ascend = IndexAscendDump(dir);
  if (!ascend.ok() || ascend->entries.empty()) return false;
  for (const std::string& problem : ascend->problems) index->skipped.push_back({problem, problem});
  // rank -> graph -> iteration -> kernel (op name and timestamp) -> tensors
  using Kernels = std::map<std::tuple<uint64_t, std::string, std::string>, KernelEntry>;
  std::map<uint32_t, std::map<uint32_t, std::pair<std::string, std::map<uint64_t, Kernels>>>> tree;
  std::string previous_path;
  for (const AscendIndexEntry& e : ascend->entries) {
    auto& [net, iterations] = tree[e.ge_layout ? e.device_id : 0][e.ge_layout ? e.model_id : 0];
    net = e.ge_layout ? e.model_name : "converted";
    KernelEntry& k =
        iterations[e.ge_layout ? e.data_index : 0][{e.timestamp, e.op_name, e.op_type}];
    k.op_type = e.op_type;
    k.op_name = k.full_name = e.op_name;
    k.first_timestamp = e.timestamp;
    TensorEntry t;
    t.is_input = e.is_input;
    t.slot = e.slot;
    t.format = kDefaultFormat;
    t.path = e.path;
    t.in_dump_file = e.in_dump_file;
    t.ascend = e.tensor;
    t.timestamp = e.timestamp;
    // A dump file holds several tensors: its size counts once, with its first tensor.
    std::error_code ec;
    if (e.path != previous_path) t.file_bytes = fs::file_size(e.path, ec);
    previous_path = e.path;
    k.tensors.push_back(std::move(t));
  }
  for (auto& [rank, graphs] : tree) {
    RankEntry r;
    r.rank = rank;
    r.dir = dir;
    for (auto& [graph_id, net_and_iterations] : graphs) {
      GraphEntry g;
      g.graph_id = graph_id;
      g.net_name = net_and_iterations.first;
      for (auto& [iteration, kernels] : net_and_iterations.second) {
        IterationEntry it;
        it.iteration = static_cast<int64_t>(iteration);
        it.dir = dir;
        // Dump files carry no execution order: kernels follow their timestamps. Each file is
        // one call of its kernel.
        std::map<std::pair<std::string, std::string>, std::vector<size_t>> calls;
        for (auto& [key, k] : kernels) {
          calls[{k.op_type, k.op_name}].push_back(it.kernels.size());
          it.kernels.push_back(std::move(k));
        }
        for (const auto& [name, positions] : calls) {
          for (size_t c = 0; c < positions.size(); ++c) {
            it.kernels[positions[c]].call = static_cast<uint32_t>(c);
            it.kernels[positions[c]].calls = static_cast<uint32_t>(positions.size());
          }
        }
        g.iterations.push_back(std::move(it));
      }
      r.graphs.push_back(std::move(g));
    }
    index->ranks.push_back(std::move(r));
  }
  return true;
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

std::string FileKernelName(const std::string& full_name) { return SanitizeName(full_name); }

bool ParseDumpFileName(const std::string& name, std::string* op_type, std::string* op_name,
                       TensorEntry* tensor) {
  if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) return false;
  const std::vector<std::string> parts = SplitDots(name.substr(0, name.size() - 4));
  // Find the io field from the right: it is followed by a numeric slot and preceded by three
  // numeric fields (task, stream, timestamp) and at least op_type and one op_name field.
  for (size_t io = parts.size() - 1; io >= 5; --io) {
    if ((parts[io] != "input" && parts[io] != "output") || io + 1 >= parts.size() ||
        !IsNumber(parts[io + 1]) || !IsNumber(parts[io - 1]) || !IsNumber(parts[io - 2]) ||
        !IsNumber(parts[io - 3])) {
      continue;
    }
    const size_t rest = parts.size() - (io + 2);  // format and dtype after the slot
    if (rest > 2) continue;
    *op_type = parts[0];
    std::string joined = parts[1];
    for (size_t i = 2; i + 3 < io; ++i) joined += "." + parts[i];
    *op_name = joined;
    tensor->timestamp = std::stoull(parts[io - 1]);
    tensor->is_input = parts[io] == "input";
    tensor->slot = static_cast<uint32_t>(std::stoul(parts[io + 1]));
    tensor->format = rest >= 1 ? parts[io + 2] : "";
    tensor->dtype_name = rest == 2 ? parts[io + 3] : "";
    tensor->dtype = DTypeFromName(tensor->dtype_name);
    return true;
  }
  return false;
}

std::string DumpIndex::SourceLine(const GraphEntry& graph, const std::string& full_name) const {
  auto it = graph.source_traces.find(full_name);
  if (it == graph.source_traces.end()) return "";
  const SourceLocation* loc = UserFrame(it->second);
  return loc ? loc->file + ":" + std::to_string(loc->line) : "";
}

const std::vector<SourceLocation>& DumpIndex::SourceTrace(const GraphEntry& graph,
                                                         const std::string& full_name) const {
  static const std::vector<SourceLocation> kNone;
  auto it = graph.source_traces.find(full_name);
  return it == graph.source_traces.end() ? kNone : it->second;
}

namespace {

// Whether a rank directory holds a {net_name}/{graph_id} directory (what IndexRank indexes).
bool HasGraphs(const fs::path& rank_dir) {
  for (const fs::path& net : SortedChildren(rank_dir)) {
    const std::string name = net.filename().string();
    if (!fs::is_directory(net) || name == "graphs" || name == "execution_order" || name[0] == '.') {
      continue;
    }
    for (const fs::path& graph : SortedChildren(net)) {
      if (fs::is_directory(graph) && IsNumber(graph.filename().string())) return true;
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
    for (const fs::path& child : SortedChildren(path)) {
      if (fs::is_directory(child) && RankId(child.filename().string(), &rank)) {
        out.dirs.emplace_back(child.string(), rank);
      }
    }
    std::stable_sort(out.dirs.begin(), out.dirs.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
  }
  if (std::any_of(out.dirs.begin(), out.dirs.end(),
                  [](const auto& d) { return HasGraphs(d.first); })) {
    return out;
  }
  // No {net_name}/{graph_id} below: a GE-layout dump or `graphdump convert` output, else not a
  // dump at all.
  DumpIndex index;
  index.root = dir;
  for (const auto& [rank_dir, id] : out.dirs) {
    index.ranks.push_back(IndexRank(rank_dir, id, IndexFilter(), &index.skipped));
  }
  if (IndexAscendLayout(path.string(), &index)) {
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

StreamedDump ForEachRank(DumpRanks ranks, const IndexFilter& filter, int threads,
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
  ParallelFor(kept.size(), std::max(1, threads), progress, [&](size_t k) {
    const size_t i = kept[k];
    const auto& [dir, rank] = ranks.dirs[i];
    DumpIndex one;
    one.root = ranks.root;
    one.ranks.push_back(IndexRank(dir, rank, filter, &one.skipped));
    skipped[i] = one.skipped;
    mixed[i] = MixedRunsOf(one.ranks.back());
    each(i, one);
  });
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
  StreamedDump streamed =
      ForEachRank(std::move(ranks), filter, DefaultThreads(), progress ? "indexing ranks" : "",
                  [&](size_t i, DumpIndex& one) {
                    kept[i] = std::move(one.ranks.front());
                    have[i] = true;
                  });
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
