// graphdump.load's table (docs/python.md): the rows of a dump's index as compact columns, built
// rank by rank on every core and appended in rank order into the buffers the NumPy arrays then
// own (no copy at the end): numbers as NumPy arrays, names as categorical (codes, categories),
// statistics as int64, float64 or object columns.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bindings.h"
#include "load_cells.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/config.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::python {
namespace {

namespace py = pybind11;
using analysis::DumpIndex;
using analysis::TensorEntry;
using internal::ValidUtf8;

// A file path as Python's file-name str (surrogateescape: os.fsencode gives the bytes back).
py::object PathText(const std::string& path) {
  PyObject* text = PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(text);
}

// Whether a tensor's statistic.csv row proves it finite: NaN and both Inf counts present and 0.
bool ProvenFinite(const TensorEntry& t) {
  if (!t.stats) return false;
  for (StatCategory c :
       {StatCategory::kNanCount, StatCategory::kPositiveInfCount, StatCategory::kNegativeInfCount}) {
    if (t.stats->values.Find(StatCategoryColumn(c)) != std::string_view("0")) return false;
  }
  return true;
}

// Where the first bad element of a tensor file lies, as watch finds it: the first NaN, else the
// first +-Inf, as an index in the tensor's shape (a 0-d tensor's is the empty index); none when
// there is none or the file cannot be read (the index's warnings and watch name such files).
std::optional<std::vector<int64_t>> FirstBadIndex(const TensorEntry& t) {
  auto npy = analysis::OpenTensor(t);
  if (!npy.ok()) return std::nullopt;
  const NpyInfo& info = (*npy)->info();
  const analysis::FiniteSummary s = analysis::SummarizeFinite(**npy);
  const int64_t first = s.nan_at.first >= 0 ? s.nan_at.first : s.inf_at.first;
  if (first < 0) return std::nullopt;
  return analysis::UnravelIndex(first, info.shape, info.fortran_order);
}

using load::Buffer;
using load::Interner;
using load::NameCodes;
using load::Names;
using load::ParseCell;
using load::PartNames;
using load::SharedNames;
using load::StatCell;
using load::StatColumn;
using load::StringMap;

// load()'s rows of one rank, as compact columns (numbers, categorical codes).
struct Part {
  std::vector<uint32_t> rank, graph, call, slot;
  std::vector<int64_t> iteration, order;
  std::vector<uint64_t> timestamp;  // 0: none
  std::vector<uint8_t> is_parameter, io;  // io: 0 input, 1 output
  PartNames kernels, op_types, nets, dtypes, sources, files;
  NameCodes stat_titles;
  std::vector<int32_t> kernel, op_type, net, dtype, source, file, shape;  // shared numbers
  std::vector<std::vector<int64_t>> shapes;
  std::vector<StatColumn> stats;  // by stat_titles' code
  Interner texts;                 // statistic cells that are not numbers
  std::vector<std::pair<size_t, std::vector<int64_t>>> bad;  // (row, first bad index)
  // (rank, graph, its .ir's path) of each graph with one: load() reads the update kernels'
  // hyperparameters there (docs/python.md).
  std::vector<std::tuple<uint32_t, uint32_t, std::string>> graph_files;

  explicit Part(Names* names) {
    kernels.shared = &names->kernels;
    op_types.shared = &names->op_types;
    nets.shared = &names->nets;
    dtypes.shared = &names->dtypes;
    sources.shared = &names->sources;
    files.shared = &names->files;
  }
  size_t size() const { return rank.size(); }
};

struct ShapeHash {
  size_t operator()(const std::vector<int64_t>& dims) const {
    size_t h = dims.size();
    for (int64_t d : dims) h = h * 1000003u ^ std::hash<int64_t>{}(d);
    return h;
  }
};

void AddRank(const DumpIndex& index, Part* c) {
  size_t rows = 0;
  for (const auto& r : index.ranks) {
    for (const auto& g : r.graphs) {
      for (const auto& it : g.iterations) {
        for (const auto& k : it.kernels) rows += k.tensors.size();
      }
    }
  }
  for (auto* v : {&c->rank, &c->graph, &c->call, &c->slot}) v->reserve(rows);
  for (auto* v : {&c->kernel, &c->op_type, &c->net, &c->dtype, &c->source, &c->file, &c->shape}) {
    v->reserve(rows);
  }
  c->iteration.reserve(rows);
  c->order.reserve(rows);
  c->timestamp.reserve(rows);
  c->is_parameter.reserve(rows);
  c->io.reserve(rows);
  std::unordered_map<std::vector<int64_t>, int32_t, ShapeHash> shape_ids;
  // A statistic.csv's titles are looked up once per file (its rows share them).
  const analysis::StatisticCells* titled = nullptr;
  std::vector<size_t> columns;
  std::vector<int64_t> row_dims;  // a statistic row's shape, as shape_ids holds shapes
  for (const auto& r : index.ranks) {
    for (const auto& g : r.graphs) {
      if (!g.ir_path.empty()) c->graph_files.emplace_back(r.rank, g.graph_id, g.ir_path);
      const int32_t net = c->nets.Id(g.net_name);
      // A kernel recurs in every iteration of its graph: its operator and source line are
      // looked up once (again only if a later entry gives it another operator).
      struct Known {
        bool seen = false;
        int32_t op_type = 0, source = 0;
        std::string op_type_bytes;
      };
      std::vector<Known> known;  // by kernel number
      for (const auto& it : g.iterations) {
        for (const auto& k : it.kernels) {
          const int32_t kernel = c->kernels.Id(k.full_name);
          if (static_cast<size_t>(kernel) >= known.size()) known.resize(static_cast<size_t>(kernel) + 1);
          Known& codes = known[static_cast<size_t>(kernel)];
          if (!codes.seen || codes.op_type_bytes != k.op_type) {
            codes.seen = true;
            codes.op_type = c->op_types.Id(k.op_type);
            codes.source = c->sources.Id(index.SourceLine(g, k.full_name));
            codes.op_type_bytes = k.op_type;
          }
          const int32_t op_type = codes.op_type;
          const int32_t source = codes.source;
          for (const auto& t : k.tensors) {
            const size_t row = c->size();
            c->rank.push_back(r.rank);
            c->graph.push_back(g.graph_id);
            c->net.push_back(net);
            c->iteration.push_back(it.iteration);
            c->call.push_back(k.call);
            c->timestamp.push_back(t.timestamp);
            c->order.push_back(k.order);
            c->kernel.push_back(kernel);
            c->op_type.push_back(op_type);
            c->is_parameter.push_back(k.is_parameter);
            c->io.push_back(t.is_input ? 0 : 1);
            c->slot.push_back(t.slot);
            c->dtype.push_back(c->dtypes.Id(t.dtype_name));
            row_dims.clear();
            if (t.stats) row_dims.assign(t.stats->shape.begin(), t.stats->shape.end());
            const std::vector<int64_t>* dims = &row_dims;
            std::unique_ptr<analysis::MappedNpy> npy;
            if (!t.stats && !t.path.empty() && !t.in_dump_file) {
              if (auto opened = analysis::MappedNpy::Open(t.path); opened.ok()) {
                npy = std::move(opened).value();
                dims = &npy->info().shape;
              }
            }
            // Looked up before it is copied: a dump has few distinct shapes.
            auto shape = shape_ids.find(*dims);
            if (shape == shape_ids.end()) {
              shape = shape_ids.emplace(*dims, static_cast<int32_t>(c->shapes.size())).first;
              c->shapes.push_back(*dims);
            }
            c->shape.push_back(shape->second);
            c->file.push_back(c->files.Id(t.path));
            c->source.push_back(source);
            if (t.stats && t.stats->values.cells()) {
              if (t.stats->values.cells() != titled) {
                titled = t.stats->values.cells();
                columns.clear();
                for (const std::string& title : titled->titles) {
                  const auto column = static_cast<size_t>(c->stat_titles.Id(title));
                  if (column == c->stats.size()) c->stats.emplace_back().Fill(row);
                  columns.push_back(column);
                }
              }
              size_t i = 0;
              t.stats->values.ForEach([&](const std::string&, std::string_view value) {
                StatColumn& column = c->stats[columns[i++]];
                // Two titles that become one name: the first one's cell.
                if (column.size() == row) column.Add(ParseCell(value, &c->texts));
              });
            }
            for (auto& column : c->stats) column.Fill(row + 1);  // missing where none
            if (!t.path.empty() && !ProvenFinite(t)) {
              std::optional<std::vector<int64_t>> at = FirstBadIndex(t);
              if (at) c->bad.emplace_back(row, std::move(*at));
            }
          }
        }
      }
    }
  }
}

// The whole table: each rank's part appended in rank order, its strings renumbered.
struct Table {
  Buffer<uint32_t> rank, graph, call, slot;
  Buffer<int64_t> iteration, order;
  Buffer<uint64_t> timestamp;
  Buffer<uint8_t> is_parameter, io;
  // A categorical column: shared numbers -> codes given in the order the ranks first met them.
  struct Codes {
    std::vector<int32_t> of;      // by shared number; -1: not yet met
    std::vector<int32_t> shared;  // by code
    Buffer<int32_t> rows;
    void Append(const PartNames& part, const std::vector<int32_t>& numbers) {
      for (int32_t id : part.first_met) {
        if (static_cast<size_t>(id) >= of.size()) of.resize(static_cast<size_t>(id) + 1, -1);
        if (of[static_cast<size_t>(id)] < 0) {
          of[static_cast<size_t>(id)] = static_cast<int32_t>(shared.size());
          shared.push_back(id);
        }
      }
      int32_t* out = rows.Grow(numbers.size());
      for (size_t i = 0; i < numbers.size(); ++i) out[i] = of[static_cast<size_t>(numbers[i])];
    }
  };
  Codes kernel, op_type, net, dtype, source, file;
  Interner stat_titles, texts;
  Buffer<int32_t> shape;
  std::unordered_map<std::vector<int64_t>, int32_t, ShapeHash> shape_ids;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<StatColumn> stats;  // by stat_titles' code
  std::vector<std::pair<size_t, std::vector<int64_t>>> bad;
  std::vector<std::tuple<uint32_t, uint32_t, std::string>> graph_files;
  size_t rows = 0;

  void Append(Part part);
};

void Table::Append(Part part) {
  const size_t base = rows;
  const size_t n = part.size();
  std::move(part.graph_files.begin(), part.graph_files.end(), std::back_inserter(graph_files));
  rank.Append(part.rank);
  graph.Append(part.graph);
  call.Append(part.call);
  slot.Append(part.slot);
  iteration.Append(part.iteration);
  order.Append(part.order);
  timestamp.Append(part.timestamp);
  is_parameter.Append(part.is_parameter);
  io.Append(part.io);
  kernel.Append(part.kernels, part.kernel);
  op_type.Append(part.op_types, part.op_type);
  net.Append(part.nets, part.net);
  dtype.Append(part.dtypes, part.dtype);
  source.Append(part.sources, part.source);
  file.Append(part.files, part.file);
  std::vector<int32_t> shape_map(part.shapes.size());
  for (size_t i = 0; i < shape_map.size(); ++i) {
    auto [it, added] = shape_ids.emplace(part.shapes[i], static_cast<int32_t>(shapes.size()));
    if (added) shapes.push_back(part.shapes[i]);
    shape_map[i] = it->second;
  }
  int32_t* s = shape.Grow(n);
  for (size_t i = 0; i < n; ++i) s[i] = shape_map[static_cast<size_t>(part.shape[i])];
  // Statistics: each of the part's columns onto the table's (a new one: missing above), each
  // of the table's the part has not: missing.
  std::vector<int32_t> text_map(part.texts.names.size());
  for (size_t i = 0; i < text_map.size(); ++i) text_map[i] = texts.Id(part.texts.names[i]);
  std::vector<const StatColumn*> from(stats.size(), nullptr);
  for (size_t p = 0; p < part.stats.size(); ++p) {
    const auto column = static_cast<size_t>(stat_titles.Id(part.stat_titles.names.names[p]));
    if (column == stats.size()) {
      stats.emplace_back().Fill(base);
      from.push_back(nullptr);
    }
    from[column] = &part.stats[p];
  }
  for (size_t c = 0; c < stats.size(); ++c) stats[c].Append(from[c], n, text_map);
  for (auto& [row, at] : part.bad) bad.emplace_back(base + row, std::move(at));
  rows += n;
}

py::tuple Categorical(Table::Codes* codes, const SharedNames& names, bool paths) {
  py::list categories;
  for (int32_t id : codes->shared) {
    categories.append(paths ? PathText(names.name(id)) : py::str(names.name(id)));
  }
  return py::make_tuple(codes->rows.Release(), categories);
}

// What load() keeps: its ranks=, iterations=, kernels= and io= (docs/python.md).
analysis::IndexFilter LoadFilter(std::optional<std::vector<uint32_t>> ranks,
                                 std::optional<std::vector<int64_t>> iterations,
                                 std::optional<std::vector<std::string>> kernel_names,
                                 std::optional<std::string> kernel_regex,
                                 std::optional<std::string> io) {
  analysis::IndexFilter filter;
  if (ranks) filter.ranks = std::set<uint32_t>(ranks->begin(), ranks->end());
  if (iterations) filter.iterations = std::set<int64_t>(iterations->begin(), iterations->end());
  if (io) {
    if (*io != "input" && *io != "output") {
      throw py::value_error("load: io='" + ValidUtf8(*io) + "' (allowed: 'input', 'output')");
    }
    filter.is_input = *io == "input";
  }
  if (kernel_names) {
    auto names = std::make_shared<std::set<std::string>>(kernel_names->begin(),
                                                         kernel_names->end());
    filter.kernels = [names](const std::string& full_name) {
      return names->count(ValidUtf8(full_name)) > 0;
    };
  } else if (kernel_regex) {
    std::shared_ptr<const std::regex> re;
    try {
      re = std::make_shared<const std::regex>(*kernel_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw py::value_error("load: kernels='" + ValidUtf8(*kernel_regex) +
                            "' is not a regular expression (ECMAScript syntax): " + e.what());
    }
    // A full name recurs in every iteration and rank: each is searched once.
    struct Seen {
      std::mutex mu;
      std::unordered_map<std::string, bool> kept;
    };
    auto seen = std::make_shared<Seen>();
    filter.kernels = [re, seen](const std::string& full_name) {
      {
        std::lock_guard<std::mutex> lock(seen->mu);
        if (auto it = seen->kept.find(full_name); it != seen->kept.end()) return it->second;
      }
      const bool kept = std::regex_search(ValidUtf8(full_name), *re);
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->kept.emplace(full_name, kept);
      return kept;
    };
  }
  return filter;
}

// A statistic column as load() gives it: int64 when every row has an int, float64 (NaN where
// missing) when every cell is a number, else objects (MD5's text).
py::object StatValues(StatColumn* column, const Interner& texts) {
  if (column->mode == StatColumn::kInts) return column->ints.Release();
  if (column->mode == StatColumn::kDoubles) return column->doubles.Release();
  py::list values;
  const py::float_ nan(std::nan(""));
  for (const StatCell& cell : column->cells) {
    switch (cell.kind) {
      case StatCell::kInt: values.append(py::int_(cell.i)); break;
      case StatCell::kFloat: values.append(py::float_(cell.d)); break;
      case StatCell::kText: values.append(py::str(texts.names[static_cast<size_t>(cell.text)])); break;
      default: values.append(nan);
    }
  }
  column->cells = {};
  return values;
}

// load()'s rows as compact columns: numbers as NumPy arrays, names as categorical (codes,
// categories), statistics by column in statistic.csv's order. Ranks are indexed one at a
// time on every core, each appended to the table as soon as the ranks before it are; what the
// filter leaves out is never kept.
py::dict IndexColumns(const std::string& path, std::optional<std::vector<uint32_t>> ranks,
                      std::optional<std::vector<int64_t>> iterations,
                      std::optional<std::vector<std::string>> kernel_names,
                      std::optional<std::string> kernel_regex, std::optional<std::string> io) {
  const analysis::IndexFilter filter =
      LoadFilter(std::move(ranks), std::move(iterations), std::move(kernel_names),
                 std::move(kernel_regex), std::move(io));
  Names names;
  Table all;
  std::vector<analysis::Skipped> skipped;
  std::vector<std::string> warnings;
  Status failure;
  std::string unknown_rank;
  {
    py::gil_scoped_release no_gil;
    StatusOr<analysis::DumpRanks> listed = analysis::ListDumpRanks(path);
    if (!listed.ok()) failure = listed.status();
    if (listed.ok()) {
      const Status checked = analysis::CheckRanks(*listed, filter);
      if (!checked.ok()) unknown_rank = "load: " + ValidUtf8(checked.message());
    }
    if (listed.ok() && unknown_rank.empty()) {
      std::vector<std::optional<Part>> parts(listed->size());
      std::vector<char> done(listed->size());  // indexed, or left out by ranks=
      for (size_t i = 0; i < done.size(); ++i) {
        done[i] = filter.ranks && !filter.ranks->count(listed->rank(i));
      }
      std::mutex mu;
      size_t next = 0;
      const StatusOr<analysis::StreamedDump> streamed = analysis::ForEachRank(
          std::move(*listed), filter, analysis::DefaultThreads(), "",
          [&](size_t i, DumpIndex& one) {
            Part part(&names);
            AddRank(one, &part);
            std::lock_guard<std::mutex> lock(mu);
            parts[i] = std::move(part);
            done[i] = 1;
            for (; next < parts.size() && done[next]; ++next) {
              if (parts[next]) all.Append(std::move(*parts[next]));
              parts[next].reset();
            }
          });
      if (streamed.ok()) {
        for (; next < parts.size(); ++next) {
          if (parts[next]) all.Append(std::move(*parts[next]));
        }
        skipped = streamed->skipped;
        warnings = streamed->warnings;
      } else {
        failure = streamed.status();
      }
    }
  }
  if (!failure.ok()) Raise(failure);
  if (!unknown_rank.empty()) throw py::value_error(unknown_rank);
  for (const std::string& warning : warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ValidUtf8(warning).c_str(), 1) != 0) {
      throw py::error_already_set();
    }
  }
  py::dict columns;
  columns["rank"] = all.rank.Release();
  columns["graph"] = all.graph.Release();
  columns["net_name"] = Categorical(&all.net, names.nets, false);
  columns["iteration"] = all.iteration.Release();
  columns["call"] = all.call.Release();
  columns["timestamp"] = all.timestamp.Release();
  columns["order"] = all.order.Release();
  columns["kernel"] = Categorical(&all.kernel, names.kernels, false);
  columns["op_type"] = Categorical(&all.op_type, names.op_types, false);
  columns["is_parameter"] = all.is_parameter.Release(py::dtype("bool"));
  columns["io"] = all.io.Release(py::dtype("int8"));  // codes of ('input', 'output')
  columns["slot"] = all.slot.Release();
  columns["dtype"] = Categorical(&all.dtype, names.dtypes, false);
  py::list shapes;
  for (const auto& dims : all.shapes) {
    py::tuple t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) t[i] = dims[i];
    shapes.append(t);
  }
  columns["shape"] = py::make_tuple(all.shape.Release(), shapes);
  columns["file"] = Categorical(&all.file, names.files, true);
  columns["source"] = Categorical(&all.source, names.sources, false);
  py::list bad;
  for (const auto& [row, at] : all.bad) {
    py::tuple index_tuple(at.size());
    for (size_t i = 0; i < at.size(); ++i) index_tuple[i] = at[i];
    bad.append(py::make_tuple(row, index_tuple));
  }
  columns["first_bad"] = bad;
  py::list stats;
  for (size_t c = 0; c < all.stats.size(); ++c) {
    stats.append(py::make_tuple(all.stat_titles.names[c], StatValues(&all.stats[c], all.texts)));
  }
  columns["statistics"] = stats;
  py::list skipped_list;
  for (const auto& s : skipped) {
    skipped_list.append(py::make_tuple(PathText(s.path), ValidUtf8(s.reason)));
  }
  columns["skipped"] = skipped_list;
  py::list graph_files;
  for (const auto& [rank, graph, ir] : all.graph_files) {
    graph_files.append(py::make_tuple(rank, graph, PathText(ir)));
  }
  columns["graph_files"] = graph_files;
  return columns;
}

}  // namespace

void BindLoad(py::module_& m) {
  m.def("index_columns", &IndexColumns, py::arg("path"), py::arg("ranks") = std::nullopt,
        py::arg("iterations") = std::nullopt, py::arg("kernel_names") = std::nullopt,
        py::arg("kernel_regex") = std::nullopt, py::arg("io") = std::nullopt,
        "One row per dumped tensor of a dump directory (filtered), as compact columns.");
}

}  // namespace graphdump::python
