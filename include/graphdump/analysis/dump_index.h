// An index of a dump directory (docs/layout.md): every tensor file and statistic.csv row addressed
// by (rank, graph, iteration, kernel, call, io, slot). Reads graphdump's layout and MindSpore's
// (including the CPU dtype spelling `Float32`, mapping.csv, constants/ and Parameter files). Only
// names and small text files are read here; tensor data is read later, file by file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/dtype.h"
#include "graphdump/graph.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

// The statistic cells of a statistic.csv file's rows, shared by the rows (StatisticValues): the
// titles once, then every row's cells in one string (each a 4-byte length, then its bytes).
struct StatisticCells {
  std::vector<std::string> titles;
  std::string bytes;
};

// A statistic.csv row's statistic columns ("Max Value" -> "1.5"), in the file's column order.
// Compact, as an index holds millions of rows: a pointer to the file's StatisticCells and where
// the row's cells start in it, with no allocation of its own.
class StatisticValues {
 public:
  StatisticValues() = default;
  StatisticValues(std::shared_ptr<const StatisticCells> cells, size_t offset)
      : cells_(std::move(cells)), offset_(offset) {}

  // The cell of `column`; nullopt when the file has no such column.
  std::optional<std::string_view> Find(std::string_view column) const;
  size_t count(std::string_view column) const { return Find(column) ? 1 : 0; }
  std::string_view at(std::string_view column) const;  // "" when absent
  size_t size() const { return cells_ ? cells_->titles.size() : 0; }
  bool empty() const { return size() == 0; }
  // f(title, cell) for every column, in the file's order.
  template <typename F>
  void ForEach(F&& f) const {
    if (!cells_) return;
    const char* p = cells_->bytes.data() + offset_;
    for (const std::string& title : cells_->titles) {
      const uint32_t n = Length(p);
      f(title, std::string_view(p + 4, n));
      p += 4 + n;
    }
  }
  // f(title) for every column, in the file's order.
  template <typename F>
  void ForEachTitle(F&& f) const {
    if (cells_) {
      for (const std::string& title : cells_->titles) f(title);
    }
  }
  // The cells the row shares with the other rows of its file (null when it has none): rows of
  // one file have the same columns.
  const StatisticCells* cells() const { return cells_.get(); }
  // Appends a cell to `cells` (building a file's rows, column by column in title order).
  static void Append(StatisticCells* cells, std::string_view cell) {
    const uint32_t n = static_cast<uint32_t>(cell.size());
    cells->bytes.append(reinterpret_cast<const char*>(&n), 4);
    cells->bytes.append(cell);
  }
  // Sets one column (appended when new); for rows built by hand.
  void Set(const std::string& column, std::string_view cell);
  struct Setter {
    StatisticValues* values;
    const std::string column;
    void operator=(std::string_view cell) { values->Set(column, cell); }
  };
  Setter operator[](const std::string& column) { return {this, column}; }

 private:
  static uint32_t Length(const char* p) {
    uint32_t n;
    std::memcpy(&n, p, 4);
    return n;
  }
  std::shared_ptr<const StatisticCells> cells_;
  size_t offset_ = 0;
};

// A statistic.csv row's Shape: its dimensions, held in place up to kInPlace of them (nearly every
// tensor), else on the heap. An index holds millions of rows, and a vector would allocate for
// each.
class RowShape {
 public:
  static constexpr uint32_t kInPlace = 5;
  RowShape() = default;
  RowShape(std::initializer_list<int64_t> dims) { Assign(dims.begin(), dims.size()); }
  RowShape(const RowShape& other) { Assign(other.data(), other.size_); }
  RowShape(RowShape&& other) noexcept { Take(other); }
  RowShape& operator=(const RowShape& other) {
    if (this != &other) {
      Release();
      Assign(other.data(), other.size_);
    }
    return *this;
  }
  RowShape& operator=(RowShape&& other) noexcept {
    if (this != &other) {
      Release();
      Take(other);
    }
    return *this;
  }
  ~RowShape() { Release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return size_ <= kInPlace ? dims_.in_place : dims_.heap; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t operator[](size_t i) const { return data()[i]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }
  std::vector<int64_t> ToVector() const { return {begin(), end()}; }
  // Sets the dimensions.
  void Assign(const int64_t* dims, size_t n) {
    Release();
    size_ = static_cast<uint32_t>(n);
    int64_t* to = dims_.in_place;
    if (n > kInPlace) to = dims_.heap = new int64_t[n];
    std::copy(dims, dims + n, to);
  }
  friend bool operator==(const RowShape& a, const RowShape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const RowShape& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void Release() {
    if (size_ > kInPlace) delete[] dims_.heap;
    size_ = 0;
  }
  void Take(RowShape& other) {
    size_ = other.size_;
    dims_ = other.dims_;
    other.size_ = 0;
  }
  union Dims {
    int64_t in_place[kInPlace];
    int64_t* heap;
  };
  Dims dims_{};
  uint32_t size_ = 0;
};

// One row of statistic.csv, as the index keeps it under its kernel (whose names it does not
// repeat).
struct StatisticRow {
  bool is_input = false;
  uint32_t slot = 0;
  // As written ("float32"); text that lives as long as the process (InternDTypeName), so that
  // moving a row copies no characters.
  std::string_view dtype;
  RowShape shape;
  uint64_t data_size = 0;
  uint64_t timestamp = 0;                     // the Timestamp column; 0 when absent or not a number
  StatisticValues values;                     // statistic columns by title
};

// `name` held once for the process: the few dtype names of statistic.csv rows.
std::string_view InternDTypeName(std::string_view name);

// A statistic.csv row with its kernel's names (ParseStatisticCsv).
struct NamedStatisticRow : StatisticRow {
  std::string op_type;
  std::string op_name;  // as written (graphdump writes the file form: '/' replaced by '_')
};

// One dumped tensor: a file, a statistic row, or both.
struct TensorEntry {
  bool is_input = false;
  uint32_t slot = 0;
  std::string format;          // "DefaultFormat"
  std::string dtype_name;      // from the file name or the statistic row, as written
  std::optional<DType> dtype;  // parsed dtype_name
  std::string path;            // empty when only a statistic row exists
  uint64_t file_bytes = 0;
  uint64_t timestamp = 0;
  std::optional<StatisticRow> stats;
  bool in_dump_file = false;  // `path` is an Ascend dump file holding this tensor (docs/ascend.md)
  // The tensor holds uninitialised memory (the output of `empty`, or such memory before anything
  // wrote it), as the graph files mark it (KernelInfo::uninitialized_outputs/_inputs): not data.
  bool uninitialized = false;
  // in_dump_file: the tensor as the file's header described it when indexed (where its bytes
  // are); when absent, OpenTensor finds it by io and slot in the header. Shared: an index holds
  // millions of tensors, few of them in Ascend dump files.
  std::shared_ptr<const AscendTensor> ascend;
};

// A kernel's tensors of one call in one iteration. A module called more than once in an
// iteration (micro-batches, a validation call, recomputation) runs its kernels once per call,
// and each call is an entry of its own: `call` numbers them per kernel and iteration from 0, in
// the order they ran (by timestamp), and `calls` says how many there were (docs/analysis.md).
struct KernelEntry {
  std::string op_type;
  std::string op_name;        // as in file names
  std::string full_name;      // from the execution order when known, else op_name
  bool is_parameter = false;  // Parameter.* (weights) and constants
  int64_t order = -1;         // position in the execution order; -1 when unknown
  uint32_t call = 0;          // this call's number in the iteration, from 0
  uint32_t calls = 1;         // the kernel's calls in the iteration
  uint64_t first_timestamp = 0;      // the call's earliest tensor timestamp (UINT64_MAX: none)
  std::vector<TensorEntry> tensors;  // sorted: inputs first, then by slot; one per (io, slot)
};

struct IterationEntry {
  int64_t iteration = 0;  // -1 for constants/
  std::string dir;
  // Parameters first, then by call, execution order, timestamp and name.
  std::vector<KernelEntry> kernels;
  // Set when the directory holds files of more than one run (says which tensor shows it).
  std::string mixed_runs;
};

// Infinities a kernel writes on purpose: its operator fills with one of its own constant
// arguments (masked_fill, where, full, fill, ...: IntendedInfinities) and that argument is
// inf or -inf, as an attention mask's masked_fill(mask, -inf) is.
struct IntendedInfinity {
  bool positive = false, negative = false;  // +inf, -inf
  std::string argument;                     // "masked_fill(value=-inf)"
};

// A kernel Inductor generated (docs/analysis.md, "Compiled against eager"), as graphs/*.pb
// describes it: its KernelInfo attributes `inductor_kernel` and `fused_ops`, and the names of
// the values it reads.
struct CompiledKernelInfo {
  std::string inductor_kernel;  // "cpp_fused_add_mul_relu_0", "extern_kernels.addmm"
  // "aten.relu.default (script.py:7); aten.mul.Tensor (script.py:7)", topological order
  std::string fused_ops;
  // Of a kernel writing several buffers: the operator whose value each output holds, one per
  // output slot as fused_ops gives operators, "-" where unknown; empty otherwise.
  std::string output_ops;
  std::vector<std::string> input_names;  // a producer kernel's full name, or a buffer's name
};

struct GraphEntry {
  uint32_t graph_id = 0;
  std::string net_name;
  std::vector<std::string> execution_order;  // full names; empty when the csv is absent
  std::vector<IterationEntry> iterations;    // ascending; constants last
  std::string ir_path;                       // graphs/ms_output_trace_code_graph_{id}.ir
  // Source trace per full name from the .ir (innermost first; none without it). Parsed on first
  // use, with the execution order's names (ParseIrSourceTraces): most commands look up the
  // sources of a few kernels, or of none. Thread-safe; copies of the entry share the result.
  const std::map<std::string, std::vector<SourceLocation>>& source_traces() const;
  // The source trace of `full_name`, sharing the parsed traces (they live while it does); null
  // when none is recorded.
  std::shared_ptr<const std::vector<SourceLocation>> SharedSourceTrace(
      const std::string& full_name) const;
  // SharedSourceTrace of a kernel at `order` in the execution order (KernelEntry::order; -1:
  // none): found by its position, without hashing its name.
  std::shared_ptr<const std::vector<SourceLocation>> SharedSourceTrace(const std::string& full_name,
                                                                       int64_t order) const;
  // Keeps the .ir's text for source_traces().
  void SetIrText(std::string text);
  // Kernels that write infinities on purpose, by full name (from graphs/*.pb; none without it).
  std::map<std::string, IntendedInfinity> intended_infinities;
  // The kernels Inductor generated, by full name (from graphs/*.pb; none in an eager graph).
  std::map<std::string, CompiledKernelInfo> compiled_kernels;
  // Kernels an argument of which the graph files do not record (`<runtime>`: a value computed
  // while the graph ran, or a list of optional tensors such as indexing's index list), by full
  // name: they read values the dump does not hold (from graphs/*.pb; none without it).
  std::set<std::string> unrecorded_arguments;

 private:
  struct IrTraces {
    std::string text;
    std::once_flag parsed;
    std::map<std::string, std::vector<SourceLocation>> traces;
    // traces' entries by name, for lookups: a model's names share long prefixes, which an
    // ordered search compares again at every level.
    std::unordered_map<std::string_view, const std::vector<SourceLocation>*> by_name;
    // The trace of each name of the execution order, by position (null: none).
    std::vector<const std::vector<SourceLocation>*> by_order;
  };
  const IrTraces* ParsedIr() const;  // null without an .ir
  std::shared_ptr<IrTraces> ir_;
};

struct RankEntry {
  uint32_t rank = 0;
  std::string dir;
  std::vector<GraphEntry> graphs;
};

// A file or row the index could not use, with the reason (names the file).
struct Skipped {
  std::string path;
  std::string reason;
};

struct DumpIndex {
  std::string root;
  std::vector<RankEntry> ranks;
  std::vector<Skipped> skipped;
  // What the reader should know about the data (a directory holding two runs), one sentence each.
  std::vector<std::string> warnings;

  // "file:line" of the frame a user recognises as theirs (UserFrame: the innermost outside
  // PyTorch's own files) recorded for `full_name` in graph `graph`, or empty.
  std::string SourceLine(const GraphEntry& graph, const std::string& full_name) const;
  // The whole source trace recorded for `full_name` (innermost first); empty when none.
  const std::vector<SourceLocation>& SourceTrace(const GraphEntry& graph,
                                                 const std::string& full_name) const;
};

// SourceLine's "file:line" of a trace, or empty.
std::string SourceLineOf(const std::vector<SourceLocation>& trace);

// The tensor an entry names, ready to read: a mapped .npy file, or the tensor read out of an
// Ascend dump file (only its own bytes, where the index recorded them: reading every tensor of
// a file costs one pass over the file, not one header parse per tensor). Errors name the file.
StatusOr<std::unique_ptr<MappedNpy>> OpenTensor(const TensorEntry& tensor);

// Indexes `dir`: a dump root holding rank_{id}/ directories, one rank_{id} directory, or a
// {net_name} directory inside one. Failing those, a GE-layout dump ({YYYYMMDDhhmmss}/
// {device_id}/{model_name}/{model_id}/{data_index}/ with Ascend dump files, docs/ascend.md) or a
// directory written by `graphdump convert`: device_id is the rank, model_id the graph and
// data_index the iteration (a converted flat directory is rank 0, graph 0, iteration 0). Returns
// kNotFound when `dir` does not exist and kInvalidArgument "not a dump directory" (naming it and
// what was expected) when it holds no dump; kIOError "DIR: cannot read the directory: REASON"
// when a directory of the dump (the root, a rank, net, graph or iteration directory) cannot be
// listed or searched: a directory is never taken for an empty one. Unreadable or malformed files
// (a bad statistic.csv, an unparsable file name) are listed in `skipped` and the rest is indexed.
// Ranks are indexed on every core; with `progress`, a Progress line counts them on a terminal.
StatusOr<DumpIndex> IndexDump(const std::string& dir, bool progress = false);

// What to index (graphdump.load's filters): what a filter leaves out is never kept, so that
// indexing part of a dump costs what the part costs (docs/python.md).
struct IndexFilter {
  std::optional<std::set<uint32_t>> ranks;     // rank ids; rank directories not listed are not read
  std::optional<std::set<int64_t>> iterations;  // -1: constants/
  // Kernels to keep, by full name (the execution order's name, else the file name); none: all.
  std::function<bool(const std::string& full_name)> kernels;
  std::optional<bool> is_input;  // only inputs (true) or only outputs (false)

  bool Keeps(const KernelEntry& kernel) const { return !kernels || kernels(kernel.full_name); }
};

// A dump listed rank by rank, to be indexed one rank at a time (ForEachRank): a command then
// holds the ranks it is indexing and what it keeps of each, not the whole index.
struct DumpRanks {
  std::string root;
  std::vector<std::pair<std::string, uint32_t>> dirs;  // rank directories, by rank id
  // A dump not laid out in rank directories (GE layout, `graphdump convert` output): indexed at
  // once by ListDumpRanks.
  std::optional<DumpIndex> whole;

  size_t size() const { return whole ? whole->ranks.size() : dirs.size(); }
  uint32_t rank(size_t i) const { return whole ? whole->ranks[i].rank : dirs[i].second; }
};

// The rank directories of `dir` (as IndexDump accepts it) without indexing them. Errors as
// IndexDump's.
StatusOr<DumpRanks> ListDumpRanks(const std::string& dir);

// kInvalidArgument "ranks: rank N is not in DIR (ranks found: 0, 1)" for the first rank of
// `filter.ranks` that `ranks` does not hold; OK when it holds them all.
Status CheckRanks(const DumpRanks& ranks, const IndexFilter& filter);

// What IndexDump adds to the ranks' own index: skipped files and warnings, merged over ranks.
struct StreamedDump {
  std::string root;
  size_t ranks = 0;
  std::vector<Skipped> skipped;       // as IndexDump's
  std::vector<std::string> warnings;  // as IndexDump's
};

// Indexes the ranks of `ranks` that `filter` keeps, `threads` ranks at a time, and calls
// `each(position, index)` with a one-rank index (the rank's own skipped files) on the thread
// that indexed it; the index is freed when `each` returns. With `progress`, a Progress line
// counts ranks on a terminal. Returns what IndexDump would add to those ranks, or IndexDump's
// kIOError for the first rank (in rank order) holding a directory that cannot be read: `each`
// may have been called for ranks before it, and no rank after it is started.
StatusOr<StreamedDump> ForEachRank(DumpRanks ranks, const IndexFilter& filter, int threads,
                                   const std::string& progress,
                                   const std::function<void(size_t, DumpIndex&)>& each);

// IndexDump of the ranks, iterations, kernels and io that `filter` keeps.
StatusOr<DumpIndex> IndexDump(const std::string& dir, const IndexFilter& filter,
                              bool progress = false);

// The file-name form of a full name (docs/layout.md): '/', '\\', '.' and ' ' become '_'.
std::string FileKernelName(const std::string& full_name);

// Parses a tensor file's base name (after mapping.csv substitution). Returns false when the name
// does not follow `{op_type}.{op_name}.{task}.{stream}.{ts}.{io}.{slot}[.{format}[.{dtype}]].npy`.
bool ParseDumpFileName(const std::string& name, std::string* op_type, std::string* op_name,
                       TensorEntry* tensor);

// Splits one kernel's tensors of one iteration (the files of every call, in any order) and its
// statistic.csv rows into one entry per call, numbered as KernelEntry says: the k-th tensor of
// an (io, slot), by timestamp, belongs to call k. A row attaches to the file of its io, slot and
// timestamp; rows whose timestamp names no such file attach to the files of their io and slot
// still without a row, in timestamp order; rows left over are statistic-only tensors. The other
// fields of `kernel` are copied into every call; the result is in call order.
std::vector<KernelEntry> SplitCalls(KernelEntry kernel, std::vector<StatisticRow> rows);
// SplitCalls appending the calls to `calls`; `rows` are moved from.
void SplitCalls(KernelEntry kernel, std::span<StatisticRow> rows, std::vector<KernelEntry>* calls);

// The kernels of `graph` whose operator fills with a constant argument of its own (masked_fill,
// masked_fill_, where, full, full_like, new_full, fill, fill_, index_fill, index_fill_) that is
// inf or -inf (graph-proto.md's argument values), by full name.
std::map<std::string, IntendedInfinity> IntendedInfinities(const GraphInfo& graph);

// The tensors of `graph`'s kernels that hold uninitialised memory (KernelInfo's
// uninitialized_inputs and uninitialized_outputs), by full name: (is_input, slot) pairs.
std::map<std::string, std::set<std::pair<bool, uint32_t>>> UninitializedTensors(
    const GraphInfo& graph);

// The kernels of `graph` with an argument recorded as `<runtime>` (docs/graph-proto.md).
std::set<std::string> UnrecordedArguments(const GraphInfo& graph);

// The kernels of `graph` whose attributes hold `inductor_kernel`, by full name.
std::map<std::string, CompiledKernelInfo> CompiledKernels(const GraphInfo& graph);

// The most columns a statistic.csv may have (graphdump writes at most 22): a header
// of more is refused whole, so that a hostile one costs no more than reading it.
inline constexpr size_t kMaxStatisticColumns = 1024;

// Parses a statistic.csv file (a regular file: OpenRegularFile). Errors are kCorrupt naming the
// file and line; a Shape must hold non-negative dimensions whose product fits int64_t, and the
// header at most kMaxStatisticColumns columns.
StatusOr<std::vector<NamedStatisticRow>> ParseStatisticCsv(const std::string& path);

// ParseStatisticCsv for the file's `text`; `path` names it in errors.
StatusOr<std::vector<NamedStatisticRow>> ParseStatisticCsvText(const std::string& text,
                                                               const std::string& path);

// Parses the source traces of an .ir text: each kernel's `# In file PATH(LINE)/ code/` (or
// `PATH:LINE/`) lines, attached to the kernel named by the preceding `Fullname with scope:
// (NAME)` line or by the preceding node line containing a name from `known_names`.
std::map<std::string, std::vector<SourceLocation>> ParseIrSourceTraces(
    const std::string& text, const std::vector<std::string>& known_names);

}  // namespace graphdump::analysis
