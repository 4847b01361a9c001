// Indexing a dump directory from its file names and text files (docs/layout.md).
#include "graphdump/analysis/dump_index.h"

#include <fmt/format.h>

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
                      uint32_t graph_id, std::vector<Skipped>* skipped) {
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
    if (IsNumber(name)) {
      graph.iterations.push_back(IndexIteration(child, std::stoll(name), ctx, skipped));
    } else if (name == "constants") {
      constants = IndexIteration(child, -1, ctx, skipped);
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
  }
  if (have_constants) graph.iterations.push_back(std::move(constants));
  return graph;
}

RankEntry IndexRank(const fs::path& dir, uint32_t rank, std::vector<Skipped>* skipped) {
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
        entry.graphs.push_back(IndexGraph(dir, name, graph, std::stoul(id), skipped));
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

StatusOr<DumpIndex> IndexDump(const std::string& dir, bool progress) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::NotFound(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) {
    return Status::InvalidArgument(dir +
                                   ": not a dump directory (it is a file; expected a "
                                   "directory holding rank_{id}/ subdirectories)");
  }
  DumpIndex index;
  index.root = dir;
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  uint32_t rank = 0;
  if (RankId(path.filename().string(), &rank)) {
    index.ranks.push_back(IndexRank(path, rank, &index.skipped));
  } else {
    std::vector<std::pair<fs::path, uint32_t>> dirs;
    for (const fs::path& child : SortedChildren(path)) {
      if (fs::is_directory(child) && RankId(child.filename().string(), &rank)) {
        dirs.emplace_back(child, rank);
      }
    }
    // Ranks are indexed on every core, each with its own list of skipped files.
    std::vector<RankEntry> ranks(dirs.size());
    std::vector<std::vector<Skipped>> skipped(dirs.size());
    ParallelFor(dirs.size(), DefaultThreads(), progress ? "indexing ranks" : "", [&](size_t i) {
      ranks[i] = IndexRank(dirs[i].first, dirs[i].second, &skipped[i]);
    });
    for (size_t i = 0; i < dirs.size(); ++i) {
      index.ranks.push_back(std::move(ranks[i]));
      index.skipped.insert(index.skipped.end(), skipped[i].begin(), skipped[i].end());
    }
    std::sort(index.ranks.begin(), index.ranks.end(),
              [](const RankEntry& a, const RankEntry& b) { return a.rank < b.rank; });
  }
  size_t graphs = 0, mixed = 0;
  for (const RankEntry& r : index.ranks) {
    graphs += r.graphs.size();
    for (const GraphEntry& g : r.graphs) {
      for (const IterationEntry& it : g.iterations) {
        if (it.mixed_runs.empty()) continue;
        if (mixed++ == 0) index.warnings.push_back(it.mixed_runs);
      }
    }
  }
  if (mixed > 1) {
    index.warnings.back() += fmt::format(" (and {} more iteration directories)", mixed - 1);
  }
  if ((index.ranks.empty() || graphs == 0) && IndexAscendLayout(path.string(), &index)) {
    return index;
  }
  if (index.ranks.empty() || graphs == 0) {
    return Status::InvalidArgument(
        dir +
        ": not a dump directory: expected rank_{id}/{net_name}/{graph_id}/{iteration}/ "
        "below it (docs/layout.md), found " +
        (index.ranks.empty() ? std::string("no rank_{id} directory")
                             : std::string("no {net_name}/{graph_id} directory")));
  }
  return index;
}

}  // namespace graphdump::analysis
