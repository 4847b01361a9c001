// Indexing one rank_{id} directory (docs/layout.md): its graphs, iterations, tensor file names,
// mapping.csv, statistic.csv rows and execution order, into a RankEntry.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "dump_index_parts.h"
#include "position_table.h"
#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/ascend_index.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/mapped_file.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/layout.h"

namespace graphdump::analysis {
namespace fs = std::filesystem;

bool IsNumber(const std::string& s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

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

namespace {

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
  const std::vector<std::string>* execution_order = nullptr;  // the graph's
  // The file form of each name of the execution order, in its order.
  std::vector<std::string> file_names;
  PositionTable by_file_name;  // file_names' positions, by name (the first of equal names)
  std::vector<char> first_of_name;  // by position: no earlier name of the order is equal

  // The execution order position of the kernel whose file-form name is `name`.
  std::optional<size_t> Position(std::string_view name) const {
    return by_file_name.Find(std::hash<std::string_view>()(name),
                             [&](uint32_t at) { return file_names[at] == name; });
  }
  // Position(name), tried first at `guess`: a statistic.csv lists kernels in execution order,
  // and the next kernel's name is then compared once instead of hashed and looked up.
  std::optional<size_t> Position(std::string_view name, size_t guess) const {
    if (guess < file_names.size() && first_of_name[guess] && file_names[guess] == name) {
      return guess;
    }
    return Position(name);
  }
};

// A kernel's files in an iteration, before they are split into calls (its statistic.csv rows
// are the iteration's StatisticRows of its `id`).
struct KernelParts {
  KernelEntry kernel;
  uint32_t id = 0;       // its place in the KernelMap
  bool dropped = false;  // its statistic.csv could not be read and it has no file
  // Its execution order position, when found while reading statistic.csv (-1: none); nullopt
  // when not looked up yet.
  std::optional<int64_t> position;
};

// An iteration's statistic.csv rows, each with the id of its kernel (KernelParts::id), in file
// order; Group() makes each kernel's rows one range, in file order.
class StatisticRows {
 public:
  void Add(uint32_t kernel, StatisticRow row) {
    if (!kernels_.empty() && kernels_.back() != kernel) grouped_ = false;
    kernels_.push_back(kernel);
    rows_.push_back(std::move(row));
  }
  // Room for about the rows of a statistic.csv of `text`, guessed from its first row's length
  // (counting lines would read the text twice): the array is not moved as it grows.
  void ReserveFor(std::string_view text) {
    const size_t header = text.find('\n');
    if (header == std::string_view::npos) return;
    const size_t row = text.find('\n', header + 1);
    if (row == std::string_view::npos) return;
    const size_t guess = text.size() / std::max<size_t>(row - header, 32) + 1;
    rows_.reserve(guess);
    kernels_.reserve(guess);
  }
  void clear() {
    rows_.clear();
    kernels_.clear();
  }
  // Groups the rows by kernel (stable) for Of(), for `count` kernels.
  void Group(size_t count) {
    first_.assign(count + 1, 0);
    for (uint32_t k : kernels_) ++first_[k + 1];
    for (size_t k = 0; k < count; ++k) first_[k + 1] += first_[k];
    if (grouped_ && std::is_sorted(kernels_.begin(), kernels_.end())) return;
    // Counting sort: rows of a kernel that are apart in the file (rare) come together.
    std::vector<size_t> next(first_.begin(), first_.end() - 1);
    std::vector<StatisticRow> sorted(rows_.size());
    for (size_t r = 0; r < rows_.size(); ++r) sorted[next[kernels_[r]]++] = std::move(rows_[r]);
    rows_ = std::move(sorted);
  }
  // The rows of `kernel`, after Group(), to be moved from.
  std::span<StatisticRow> Of(uint32_t kernel) {
    return std::span<StatisticRow>(rows_).subspan(first_[kernel], first_[kernel + 1] - first_[kernel]);
  }

 private:
  std::vector<StatisticRow> rows_;
  std::vector<uint32_t> kernels_;
  std::vector<size_t> first_;  // Group(): where each kernel's rows start
  bool grouped_ = true;        // no kernel's rows came apart so far
};

// An iteration's kernels by (op_type, op_name), made on first use, in a hash table: names of
// one model share long prefixes ("Default_network-..."), which an ordered map compares again at
// every level. The table holds positions in the deque, which never moves a kernel.
class KernelMap {
 public:
  using Key = std::pair<std::string_view, std::string_view>;
  KernelParts& operator[](Key key) {
    HashNames();
    return Find(key);
  }

  // operator[] for a kernel at execution order position `position`. While every kernel comes
  // this way at a position past the last one (a statistic.csv in execution order), a kernel is
  // new without a lookup: the same name has the same position. Names are hashed from the first
  // kernel out of that order on.
  KernelParts& At(Key key, int64_t position) {
    if (!in_order_ || position <= last_position_) return (*this)[key];
    last_position_ = position;
    KernelParts& parts = Add(key);
    parts.position = position;
    unhashed_.push_back(parts.id);
    return parts;
  }
  // operator[] for a kernel with no execution order position: a parameter (which At never
  // adds) or a name the order lacks. Such a key names none of At's kernels, which stay
  // unhashed (a graphdump statistic.csv lists the parameters first).
  KernelParts& Unpositioned(Key key) { return Find(key); }
  // f(parts) for every kernel, in the order they were first named; f may move the kernel out
  // (the map is not used after).
  template <typename F>
  void ForEach(F&& f) {
    for (KernelParts& parts : parts_) f(parts);
  }
  size_t size() const { return parts_.size(); }
  // Room for `kernels` names in the table, when names are hashed.
  void reserve(size_t kernels) { reserve_ = kernels; }

 private:
  KernelParts& Add(Key key) {
    KernelParts& parts = parts_.emplace_back();
    parts.id = static_cast<uint32_t>(parts_.size() - 1);
    parts.kernel.op_type = key.first;
    parts.kernel.op_name = key.second;
    return parts;
  }
  // The kernel named `key` among the hashed ones, added (and hashed) when new.
  KernelParts& Find(Key key) {
    const size_t hash = Hash(key);
    const std::optional<uint32_t> found = by_name_.Find(hash, [&](uint32_t at) {
      const KernelEntry& k = parts_[at].kernel;
      return k.op_name == key.second && k.op_type == key.first;
    });
    if (found) return parts_[*found];
    KernelParts& parts = Add(key);
    by_name_.Insert(hash, parts.id);
    return parts;
  }
  // Hashes At's kernels, once: every kernel is in the table from here on.
  void HashNames() {
    if (!in_order_) return;
    in_order_ = false;
    by_name_.reserve(std::max(reserve_, parts_.size()));
    for (uint32_t id : unhashed_) {
      by_name_.Insert(Hash({parts_[id].kernel.op_type, parts_[id].kernel.op_name}), id);
    }
    unhashed_ = {};
  }
  static size_t Hash(const Key& k) {
    const size_t a = std::hash<std::string_view>()(k.first);
    return a ^ (std::hash<std::string_view>()(k.second) + 0x9e3779b97f4a7c15ULL + (a << 6) +
                (a >> 2));
  }
  std::deque<KernelParts> parts_;
  PositionTable by_name_;
  bool in_order_ = true;           // At adds kernels without hashing them
  std::vector<uint32_t> unhashed_;  // the kernels At added, while in_order_
  int64_t last_position_ = -1;     // At's last position
  size_t reserve_ = 0;
};

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
  KernelEntry& k = (*kernels)[{parsed.op_type, parsed.op_name}].kernel;
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
      tensor.ascend = std::make_shared<const AscendTensor>(t);
      tensor.timestamp = parsed.timestamp;
      tensor.file_bytes = std::exchange(file_bytes, 0);
      k.tensors.push_back(std::move(tensor));
    }
  }
}

StatusOr<IterationEntry> IndexIteration(const fs::path& dir, int64_t iteration,
                                        const GraphContext& ctx, std::vector<Skipped>* skipped) {
  IterationEntry entry;
  entry.iteration = iteration;
  entry.dir = dir.string();
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> files, SortedChildren(dir));
  const auto mapping = ReadMapping(dir, skipped);
  KernelMap kernels;
  kernels.reserve(ctx.file_names.size());  // most kernels of the execution order are dumped
  for (const fs::path& file : files) {
    std::string name = file.filename().string();
    if (auto it = mapping.find(name); it != mapping.end()) name = it->second;
    if ((file.extension() == ".npy" || LooksLikeAscendDumpName(name)) &&
        RefusedLink(file, skipped)) {
      continue;
    }
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
    kernels[{op_type, op_name}].kernel.tensors.push_back(std::move(tensor));
  }
  const fs::path csv = dir / "statistic.csv";
  std::error_code ec;
  StatisticRows rows;
  if (fs::exists(csv, ec) && !RefusedLink(csv, skipped)) {
    // Rows of one kernel are next to each other: its map entry is looked up once per run of
    // rows, and its file-form name made once.
    std::string type, raw_name, sanitized;
    KernelParts* parts = nullptr;
    size_t next_position = 0;  // where the next row's kernel likely is in the execution order
    Status parsed = Status::Ok();
    StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(csv.string(), true);
    if (mapped.ok()) {
      const std::string_view text(reinterpret_cast<const char*>((*mapped)->data()),
                                  (*mapped)->size());
      rows.ReserveFor(text);
      parsed = ParseStatisticRows(
          text, csv.string(),
          [&](std::string_view op_type, std::string_view op_name, StatisticRow row) {
            if (!parts || op_type != type || op_name != raw_name) {
              type = op_type;
              raw_name = op_name;
              // Some writers keep the full name's '/' in the row; files always use the
              // sanitized form.
              std::string_view name = raw_name;
              if (NeedsSanitizing(raw_name)) name = sanitized = FileKernelName(raw_name);
              if (type == "Parameter") {
                parts = &kernels.Unpositioned({type, name});
              } else {
                const std::optional<size_t> at = ctx.Position(name, next_position);
                if (at) {
                  next_position = *at + 1;
                  parts = &kernels.At({type, name}, static_cast<int64_t>(*at));
                } else {
                  parts = &kernels.Unpositioned({type, name});
                }
                parts->position = at ? static_cast<int64_t>(*at) : -1;
              }
            }
            rows.Add(parts->id, std::move(row));
          });
    } else {
      parsed = mapped.status();
    }
    if (!parsed.ok()) {
      skipped->push_back({csv.string(), parsed.message()});
      rows.clear();
      kernels.ForEach([](KernelParts& p) { p.dropped = p.kernel.tensors.empty(); });
    }
  }
  rows.Group(kernels.size());
  std::vector<KernelEntry> calls;
  calls.reserve(kernels.size());
  std::optional<size_t> mixed;  // the second call of the kernel the mixed-run warning names
  kernels.ForEach([&](KernelParts& p) {
    if (p.dropped) return;
    KernelEntry& k = p.kernel;
    k.is_parameter = k.op_type == "Parameter";
    if (!k.is_parameter && !p.position) {
      const std::optional<size_t> at = ctx.Position(k.op_name);
      p.position = at ? static_cast<int64_t>(*at) : -1;
    }
    if (!k.is_parameter && *p.position >= 0) {
      k.full_name = (*ctx.execution_order)[static_cast<size_t>(*p.position)];
      k.order = *p.position;
    } else {
      k.full_name = k.op_name;
    }
    const size_t first = calls.size();
    SplitCalls(std::move(k), rows.Of(p.id), &calls);
    // MindSpore runs each kernel of a graph once per iteration: there, a second call is a
    // second run dumped into the same path. The warning names the first such kernel by
    // (op_type, op_name).
    if (!ctx.one_run && calls.size() - first > 1) {
      const KernelEntry& second = calls[first + 1];
      if (!mixed || std::tie(second.op_type, second.op_name) <
                        std::tie(calls[*mixed].op_type, calls[*mixed].op_name)) {
        mixed = first + 1;
      }
    }
  });
  if (mixed) {
    const KernelEntry& second = calls[*mixed];
    const TensorEntry& t = second.tensors.front();
    entry.mixed_runs = fmt::format(
        "{} holds files of more than one run ({} has two files for {} {}): results mix "
        "runs; dump each run into its own directory (docs/layout.md)",
        dir.string(), second.op_name, t.is_input ? "input" : "output", t.slot);
  }
  // Parameters first, then by call: the execution order, then kernels the order does not list,
  // by time. Sorted as positions, then moved once.
  auto before = [](const KernelEntry& a, const KernelEntry& b) {
    auto key = [](const KernelEntry& k) {
      return std::tuple<bool, uint32_t, bool, int64_t, uint64_t, const std::string&,
                        const std::string&>(!k.is_parameter, k.call, k.order < 0, k.order,
                                            k.first_timestamp, k.op_name, k.op_type);
    };
    return key(a) < key(b);
  };
  // Kernels read in execution order are in order already.
  if (std::is_sorted(calls.begin(), calls.end(), before)) {
    entry.kernels = std::move(calls);
    return entry;
  }
  std::vector<uint32_t> sorted(calls.size());
  for (uint32_t i = 0; i < sorted.size(); ++i) sorted[i] = i;
  std::sort(sorted.begin(), sorted.end(),
            [&](uint32_t a, uint32_t b) { return before(calls[a], calls[b]); });
  entry.kernels.reserve(calls.size());
  for (uint32_t i : sorted) entry.kernels.push_back(std::move(calls[i]));
  return entry;
}

// Marks the tensors that hold uninitialised memory (docs/file-format.md): those the graph files
// list (`uninitialized`, by full name), and every output of a kernel whose operator allocates
// without writing (`empty`, `empty_like`...), which a dump without graph files shows too.
void MarkUninitialized(const std::map<std::string, std::set<std::pair<bool, uint32_t>>>& listed,
                       GraphEntry* graph) {
  for (IterationEntry& it : graph->iterations) {
    for (KernelEntry& k : it.kernels) {
      if (k.is_parameter) continue;
      const bool allocates = AllocatesUninitialized(k.op_type);
      auto found = listed.empty() ? listed.end() : listed.find(k.full_name);
      if (!allocates && found == listed.end()) continue;
      for (TensorEntry& t : k.tensors) {
        t.uninitialized = (allocates && !t.is_input) ||
                          (found != listed.end() && found->second.count({t.is_input, t.slot}));
      }
    }
  }
}

StatusOr<GraphEntry> IndexGraph(const fs::path& rank_dir, const std::string& net,
                                const fs::path& dir, uint32_t graph_id, const IndexFilter& filter,
                                std::vector<Skipped>* skipped) {
  GraphEntry graph;
  graph.graph_id = graph_id;
  graph.net_name = net;
  const std::string id = std::to_string(graph_id);
  const fs::path order_csv =
      rank_dir / "execution_order" / ("ms_execution_order_graph_" + id + ".csv");
  if (Present(order_csv, skipped)) {
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
  ctx.execution_order = &graph.execution_order;
  ctx.file_names.reserve(graph.execution_order.size());
  for (const std::string& name : graph.execution_order) {
    ctx.file_names.push_back(FileKernelName(name));
  }
  ctx.by_file_name.reserve(graph.execution_order.size());
  ctx.first_of_name.assign(ctx.file_names.size(), 0);
  for (size_t i = 0; i < ctx.file_names.size(); ++i) {
    if (!ctx.Position(ctx.file_names[i])) {
      ctx.by_file_name.Insert(std::hash<std::string_view>()(ctx.file_names[i]),
                              static_cast<uint32_t>(i));
      ctx.first_of_name[i] = 1;
    }
  }
  const fs::path ir = rank_dir / "graphs" / ("ms_output_trace_code_graph_" + id + ".ir");
  if (Present(ir, skipped)) {
    graph.ir_path = ir.string();
    graph.SetIrText(ReadText(ir, skipped));
  }
  // graphdump's graph files record each kernel's arguments (docs/graph-proto.md).
  const fs::path pb = rank_dir / "graphs" / ("ms_output_trace_code_graph_" + id + ".pb");
  std::map<std::string, std::set<std::pair<bool, uint32_t>>> uninitialized;
  if (fs::is_regular_file(pb, ec)) {
    StatusOr<GraphInfo> info = ParseGraphProto(ReadText(pb, skipped), pb.string());
    if (info.ok()) {
      graph.intended_infinities = IntendedInfinities(*info);
      graph.compiled_kernels = CompiledKernels(*info);
      uninitialized = UninitializedTensors(*info);
      graph.unrecorded_arguments = UnrecordedArguments(*info);
    } else {
      skipped->push_back({pb.string(), info.status().message()});
    }
  }
  IterationEntry constants;
  bool have_constants = false;
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> children, SortedChildren(dir));
  for (const fs::path& child : children) {
    const std::string name = child.filename().string();
    const bool numbered = IsNumber(name);
    if (!numbered && name != "constants") continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(const bool is_directory, IsSubdirectory(child));
    if (!is_directory) continue;
    const int64_t iteration = numbered ? std::stoll(name) : -1;
    if (filter.iterations && !filter.iterations->count(iteration)) continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(IterationEntry entry,
                               IndexIteration(child, iteration, ctx, skipped));
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
  MarkUninitialized(uninitialized, &graph);
  return graph;
}

}  // namespace

StatusOr<RankEntry> IndexRank(const fs::path& dir, uint32_t rank, const IndexFilter& filter,
                              std::vector<Skipped>* skipped) {
  RankEntry entry;
  entry.rank = rank;
  entry.dir = dir.string();
  if (RefusedLink(dir, skipped)) return entry;
  GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> nets, SortedChildren(dir));
  for (const fs::path& net : nets) {
    const std::string name = net.filename().string();
    if (name == "graphs" || name == "execution_order" || name[0] == '.') continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(const bool is_directory, IsSubdirectory(net));
    if (!is_directory) continue;
    GRAPHDUMP_ASSIGN_OR_RETURN(const std::vector<fs::path> graphs, SortedChildren(net));
    for (const fs::path& graph : graphs) {
      const std::string id = graph.filename().string();
      if (!IsNumber(id)) continue;
      GRAPHDUMP_ASSIGN_OR_RETURN(const bool graph_is_directory, IsSubdirectory(graph));
      if (!graph_is_directory) continue;
      GRAPHDUMP_ASSIGN_OR_RETURN(GraphEntry g,
                                 IndexGraph(dir, name, graph, std::stoul(id), filter, skipped));
      entry.graphs.push_back(std::move(g));
    }
  }
  std::sort(entry.graphs.begin(), entry.graphs.end(),
            [](const GraphEntry& a, const GraphEntry& b) { return a.graph_id < b.graph_id; });
  return entry;
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

}  // namespace graphdump::analysis
