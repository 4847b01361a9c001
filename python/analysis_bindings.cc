// _graphdump's analysis half (no LibTorch): the dump index as columns for a pandas DataFrame,
// tensors read out of dump files, and compare and watch as the CLI computes them.
//
// A dump's names can hold any bytes. Names, fields, messages and results reach Python with the
// bytes that are not UTF-8 replaced by U+FFFD, as the CLI's --json replaces them; file paths
// are decoded as Python decodes file names (os.fsdecode), so that they open again. Paths come
// in as bytes (os.fsencode).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <unordered_map>

#include <string>
#include <vector>

#include "bindings.h"
#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/config.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/statistic_catalogue.h"

namespace graphdump::python {
namespace {

namespace py = pybind11;
using analysis::DumpIndex;
using analysis::TensorEntry;

PyObject* g_config_error = nullptr;

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
// first +-Inf, as an index in the tensor's shape; empty when there is none or the file cannot be
// read (the index's warnings and watch name such files).
std::vector<int64_t> FirstBadIndex(const TensorEntry& t) {
  auto npy = analysis::OpenTensor(t);
  if (!npy.ok()) return {};
  const NpyInfo& info = (*npy)->info();
  const analysis::FiniteSummary s = analysis::SummarizeFinite(**npy);
  const int64_t first = s.nan_at.first >= 0 ? s.nan_at.first : s.inf_at.first;
  if (first < 0 || info.shape.empty()) return {};
  return analysis::UnravelIndex(first, info.shape, info.fortran_order);
}

// Strings of one column, each kept once: a row holds its string's number (a categorical code).
struct Interner {
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> names;
  int32_t Id(const std::string& s) {
    auto [it, added] = ids.emplace(s, static_cast<int32_t>(names.size()));
    if (added) names.push_back(s);
    return it->second;
  }
};

// A statistic.csv cell as load() gives it: an int, else a float, else text (Python's int() and
// float() of the cell); missing where a tensor has no such column.
struct StatCell {
  enum Kind : uint8_t { kMissing, kInt, kFloat, kText } kind = kMissing;
  int64_t i = 0;
  double d = 0;
  int32_t text = -1;
};

StatCell ParseCell(std::string_view text, Interner* texts) {
  StatCell c;
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  std::string_view digits = t;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (!digits.empty()) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc() && ptr == digits.data() + digits.size() &&
        (digits.size() == t.size() || digits.front() != '-')) {
      c.kind = StatCell::kInt;
      c.i = v;
      return c;
    }
    const std::string copy(t);
    char* end = nullptr;
    const double d = std::strtod(copy.c_str(), &end);
    if (end == copy.c_str() + copy.size() && copy.find_first_of("xX") == std::string::npos) {
      c.kind = StatCell::kFloat;
      c.d = d;
      return c;
    }
  }
  c.kind = StatCell::kText;
  c.text = texts->Id(ValidUtf8(text));
  return c;
}

// load()'s rows of some ranks, as compact columns (numbers, categorical codes).
struct Columns {
  std::vector<uint32_t> rank, graph, call, slot;
  std::vector<int64_t> iteration, order;
  std::vector<uint64_t> timestamp;  // 0: none
  std::vector<uint8_t> is_parameter, is_input;
  Interner kernels, op_types, nets, dtypes, sources, files;
  std::vector<int32_t> kernel, op_type, net, dtype, source, file, shape;
  std::map<std::vector<int64_t>, int32_t> shape_ids;
  std::vector<std::vector<int64_t>> shapes;
  Interner stat_columns;                // titles, in the order first met
  std::vector<std::vector<StatCell>> stats;  // per title, per row
  Interner texts;                       // statistic cells that are not numbers
  std::vector<std::pair<size_t, std::vector<int64_t>>> bad;  // (row, first bad index)

  size_t size() const { return rank.size(); }
};

void AddRank(const DumpIndex& index, Columns* c) {
  for (const auto& r : index.ranks) {
    for (const auto& g : r.graphs) {
      const int32_t net = c->nets.Id(ValidUtf8(g.net_name));
      for (const auto& it : g.iterations) {
        for (const auto& k : it.kernels) {
          const int32_t source = c->sources.Id(ValidUtf8(index.SourceLine(g, k.full_name)));
          const int32_t kernel = c->kernels.Id(ValidUtf8(k.full_name));
          const int32_t op_type = c->op_types.Id(ValidUtf8(k.op_type));
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
            c->is_input.push_back(t.is_input);
            c->slot.push_back(t.slot);
            c->dtype.push_back(c->dtypes.Id(ValidUtf8(t.dtype_name)));
            std::vector<int64_t> dims = t.stats ? t.stats->shape : std::vector<int64_t>{};
            if (!t.stats && !t.path.empty() && !t.in_dump_file) {
              if (auto npy = analysis::MappedNpy::Open(t.path); npy.ok()) {
                dims = (*npy)->info().shape;
              }
            }
            auto [shape, added] =
                c->shape_ids.emplace(dims, static_cast<int32_t>(c->shapes.size()));
            if (added) c->shapes.push_back(dims);
            c->shape.push_back(shape->second);
            c->file.push_back(c->files.Id(t.path));
            c->source.push_back(source);
            if (t.stats) {
              t.stats->values.ForEach([&](const std::string& title, std::string_view value) {
                const size_t column = static_cast<size_t>(c->stat_columns.Id(ValidUtf8(title)));
                if (column == c->stats.size()) c->stats.emplace_back(row);
                c->stats[column].push_back(ParseCell(value, &c->texts));
              });
            }
            for (auto& cells : c->stats) cells.resize(row + 1);  // missing where none
            if (!t.path.empty() && !ProvenFinite(t)) {
              std::vector<int64_t> at = FirstBadIndex(t);
              if (!at.empty()) c->bad.emplace_back(row, std::move(at));
            }
          }
        }
      }
    }
  }
}

// Appends `part` (the next ranks' rows) to `all`, renumbering its strings.
void Append(Columns part, Columns* all) {
  const size_t base = all->size();
  auto cat = [](std::vector<uint32_t>* to, const std::vector<uint32_t>& from) {
    to->insert(to->end(), from.begin(), from.end());
  };
  cat(&all->rank, part.rank);
  cat(&all->graph, part.graph);
  cat(&all->call, part.call);
  cat(&all->slot, part.slot);
  all->iteration.insert(all->iteration.end(), part.iteration.begin(), part.iteration.end());
  all->order.insert(all->order.end(), part.order.begin(), part.order.end());
  all->timestamp.insert(all->timestamp.end(), part.timestamp.begin(), part.timestamp.end());
  all->is_parameter.insert(all->is_parameter.end(), part.is_parameter.begin(),
                           part.is_parameter.end());
  all->is_input.insert(all->is_input.end(), part.is_input.begin(), part.is_input.end());
  auto renumber = [](const Interner& from, const std::vector<int32_t>& codes, Interner* to,
                     std::vector<int32_t>* out) {
    std::vector<int32_t> map(from.names.size());
    for (size_t i = 0; i < map.size(); ++i) map[i] = to->Id(from.names[i]);
    for (int32_t code : codes) out->push_back(map[static_cast<size_t>(code)]);
  };
  renumber(part.kernels, part.kernel, &all->kernels, &all->kernel);
  renumber(part.op_types, part.op_type, &all->op_types, &all->op_type);
  renumber(part.nets, part.net, &all->nets, &all->net);
  renumber(part.dtypes, part.dtype, &all->dtypes, &all->dtype);
  renumber(part.sources, part.source, &all->sources, &all->source);
  renumber(part.files, part.file, &all->files, &all->file);
  std::vector<int32_t> shape_map(part.shapes.size());
  for (size_t i = 0; i < shape_map.size(); ++i) {
    auto [it, added] =
        all->shape_ids.emplace(part.shapes[i], static_cast<int32_t>(all->shapes.size()));
    if (added) all->shapes.push_back(part.shapes[i]);
    shape_map[i] = it->second;
  }
  for (int32_t s : part.shape) all->shape.push_back(shape_map[static_cast<size_t>(s)]);
  std::vector<int32_t> text_map(part.texts.names.size());
  for (size_t i = 0; i < text_map.size(); ++i) text_map[i] = all->texts.Id(part.texts.names[i]);
  for (size_t p = 0; p < part.stats.size(); ++p) {
    const size_t column = static_cast<size_t>(all->stat_columns.Id(part.stat_columns.names[p]));
    if (column == all->stats.size()) all->stats.emplace_back(base);
    for (StatCell cell : part.stats[p]) {
      if (cell.kind == StatCell::kText) cell.text = text_map[static_cast<size_t>(cell.text)];
      all->stats[column].push_back(cell);
    }
  }
  for (auto& cells : all->stats) cells.resize(all->size());
  for (auto& [row, at] : part.bad) all->bad.emplace_back(base + row, std::move(at));
}

template <typename T>
py::array_t<T> Array(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

py::tuple Categorical(const std::vector<int32_t>& codes, const Interner& names, bool paths) {
  py::list categories;
  for (const std::string& name : names.names) {
    categories.append(paths ? PathText(name) : py::str(name));
  }
  return py::make_tuple(Array(codes), categories);
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

// load()'s rows as compact columns: numbers as NumPy arrays, names as categorical (codes,
// categories), statistics by column in statistic.csv's order. Ranks are indexed one at a
// time on every core; what the filter leaves out is never kept.
py::dict IndexColumns(const std::string& path, std::optional<std::vector<uint32_t>> ranks,
                      std::optional<std::vector<int64_t>> iterations,
                      std::optional<std::vector<std::string>> kernel_names,
                      std::optional<std::string> kernel_regex, std::optional<std::string> io) {
  const analysis::IndexFilter filter =
      LoadFilter(std::move(ranks), std::move(iterations), std::move(kernel_names),
                 std::move(kernel_regex), std::move(io));
  Columns all;
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
      // Each rank's rows are appended in rank order as soon as the ranks before it are in.
      std::vector<std::optional<Columns>> parts(listed->size());
      std::vector<char> done(listed->size());  // indexed, or left out by ranks=
      for (size_t i = 0; i < done.size(); ++i) {
        done[i] = filter.ranks && !filter.ranks->count(listed->rank(i));
      }
      std::mutex mu;
      size_t next = 0;
      const analysis::StreamedDump streamed = analysis::ForEachRank(
          std::move(*listed), filter, analysis::DefaultThreads(), "",
          [&](size_t i, DumpIndex& one) {
            Columns part;
            AddRank(one, &part);
            std::lock_guard<std::mutex> lock(mu);
            parts[i] = std::move(part);
            done[i] = 1;
            for (; next < parts.size() && done[next]; ++next) {
              if (parts[next]) Append(std::move(*parts[next]), &all);
              parts[next].reset();
            }
          });
      for (; next < parts.size(); ++next) {
        if (parts[next]) Append(std::move(*parts[next]), &all);
      }
      skipped = streamed.skipped;
      warnings = streamed.warnings;
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
  columns["rank"] = Array(all.rank);
  columns["graph"] = Array(all.graph);
  columns["net_name"] = Categorical(all.net, all.nets, false);
  columns["iteration"] = Array(all.iteration);
  columns["call"] = Array(all.call);
  columns["timestamp"] = Array(all.timestamp);
  columns["order"] = Array(all.order);
  columns["kernel"] = Categorical(all.kernel, all.kernels, false);
  columns["op_type"] = Categorical(all.op_type, all.op_types, false);
  columns["is_parameter"] = Array(all.is_parameter);
  columns["is_input"] = Array(all.is_input);
  columns["slot"] = Array(all.slot);
  columns["dtype"] = Categorical(all.dtype, all.dtypes, false);
  py::list shapes;
  for (const auto& dims : all.shapes) {
    py::tuple t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) t[i] = dims[i];
    shapes.append(t);
  }
  columns["shape"] = py::make_tuple(Array(all.shape), shapes);
  columns["file"] = Categorical(all.file, all.files, true);
  columns["source"] = Categorical(all.source, all.sources, false);
  py::list bad;
  for (const auto& [row, at] : all.bad) {
    py::tuple index_tuple(at.size());
    for (size_t i = 0; i < at.size(); ++i) index_tuple[i] = at[i];
    bad.append(py::make_tuple(row, index_tuple));
  }
  columns["first_bad"] = bad;
  // Statistics: int64 when every row has an int, float64 (NaN where missing) when every cell
  // is a number, else objects (MD5's text).
  py::list stats;
  for (size_t c = 0; c < all.stats.size(); ++c) {
    const std::vector<StatCell>& cells = all.stats[c];
    bool ints = true, numbers = true;
    for (const StatCell& cell : cells) {
      ints = ints && cell.kind == StatCell::kInt;
      numbers = numbers && cell.kind != StatCell::kText;
    }
    py::object values;
    if (ints) {
      std::vector<int64_t> v(cells.size());
      for (size_t i = 0; i < cells.size(); ++i) v[i] = cells[i].i;
      values = Array(v);
    } else if (numbers) {
      std::vector<double> v(cells.size());
      for (size_t i = 0; i < cells.size(); ++i) {
        v[i] = cells[i].kind == StatCell::kInt     ? static_cast<double>(cells[i].i)
               : cells[i].kind == StatCell::kFloat ? cells[i].d
                                                   : std::nan("");
      }
      values = Array(v);
    } else {
      py::list v;
      const py::float_ nan(std::nan(""));
      for (const StatCell& cell : cells) {
        switch (cell.kind) {
          case StatCell::kInt: v.append(py::int_(cell.i)); break;
          case StatCell::kFloat: v.append(py::float_(cell.d)); break;
          case StatCell::kText: v.append(py::str(all.texts.names[cell.text])); break;
          default: v.append(nan);
        }
      }
      values = v;
    }
    stats.append(py::make_tuple(all.stat_columns.names[c], values));
  }
  columns["statistics"] = stats;
  py::list skipped_list;
  for (const auto& s : skipped) {
    skipped_list.append(py::make_tuple(PathText(s.path), ValidUtf8(s.reason)));
  }
  columns["skipped"] = skipped_list;
  return columns;
}

// A tensor of a dump file as (descr, shape, bytes): a .npy's data, or input/output `slot` of an
// Ascend dump file. Raw bfloat16 ('<E2', which NumPy cannot load) comes back as float32, widened
// exactly as the dump writes bfloat16.
py::tuple ReadTensor(const std::string& path, bool ascend_dump_file, bool is_input, uint32_t slot) {
  StatusOr<std::unique_ptr<analysis::MappedNpy>> npy =
      ascend_dump_file ? analysis::MappedNpy::FromAscendDumpFile(path, is_input, slot)
                       : analysis::MappedNpy::Open(path);
  if (!npy.ok()) Raise(npy.status());
  const NpyInfo& info = (*npy)->info();
  const auto* bytes = reinterpret_cast<const uint8_t*>((*npy)->data());
  if (info.dtype == DType::kBFloat16) {
    std::vector<uint8_t> widened;
    EncodeNpyPayload(DType::kBFloat16, bytes, info.elements, &widened);
    py::bytes data(reinterpret_cast<const char*>(widened.data()), widened.size());
    return py::make_tuple(std::string(NpyDescr(DType::kBFloat16)), info.shape,
                          info.fortran_order, data);
  }
  py::bytes data(reinterpret_cast<const char*>(bytes), info.data_bytes);
  return py::make_tuple(ValidUtf8(info.descr), info.shape, info.fortran_order, data);
}

// atol/rtol: both None for each pair's dtype standard; else the elementwise rule (an unset one
// takes its CLI default).
py::tuple Compare(const std::string& a, const std::string& b, std::optional<int64_t> iteration,
                  std::optional<double> atol, std::optional<double> rtol) {
  analysis::CompareOptions options;
  options.iteration = iteration;
  options.user_tolerances = atol.has_value() || rtol.has_value();
  if (atol) options.atol = *atol;
  if (rtol) options.rtol = *rtol;
  options.progress = false;
  std::string csv, json;
  analysis::CompareDirsInfo info;
  StatusOr<analysis::CompareResult> result = Status::Internal("not compared");
  {
    py::gil_scoped_release no_gil;
    // Rank pair by rank pair, as the CLI: memory holds the pairs being compared and the result.
    result = analysis::CompareDumpDirs(a, b, options, &info);
    if (result.ok()) {
      csv = ValidUtf8(analysis::CompareResultCsv(*result));
      json = analysis::CompareResultJson(*result);
    }
  }
  if (!result.ok()) Raise(result.status());
  for (const auto* warnings : {&info.warnings_a, &info.warnings_b}) {
    for (const std::string& warning : *warnings) {
      if (PyErr_WarnEx(PyExc_UserWarning, ValidUtf8(warning).c_str(), 1) != 0) {
        throw py::error_already_set();
      }
    }
  }
  return py::make_tuple(csv, json);
}

std::string Watch(const std::string& path, const std::string& checks_text,
                  bool count_intended_inf) {
  StatusOr<std::vector<analysis::WatchCheck>> checks = analysis::ParseWatchChecks(checks_text);
  if (!checks.ok()) Raise(checks.status());
  analysis::WatchOptions options;
  options.progress = false;
  options.count_intended_inf = count_intended_inf;
  std::vector<std::string> warnings;
  StatusOr<std::unique_ptr<analysis::SpilledWatch>> result = Status::Internal("not run");
  {
    py::gil_scoped_release no_gil;
    // Rank by rank, as the CLI's --json: each rank's hits are spilled to a temporary file as
    // JSON text and merged into the one string returned, never held as hits besides it.
    result = analysis::SpilledWatch::Run(path, *checks, options, &warnings);
  }
  if (!result.ok()) Raise(result.status());
  for (const std::string& warning : warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ValidUtf8(warning).c_str(), 1) != 0) {
      throw py::error_already_set();
    }
  }
  std::string json;
  Status written = Status::Ok();
  {
    py::gil_scoped_release no_gil;
    written = (*result)->WriteJson([&](std::string_view text) {
      json += text;
      return Status::Ok();
    });
  }
  if (!written.ok()) Raise(written);
  return json;
}

}  // namespace

void RaiseConfigError(const std::string& message) {
  PyErr_SetString(g_config_error, ValidUtf8(message).c_str());
  throw py::error_already_set();
}

void Raise(const Status& status) {
  const std::string message = ValidUtf8(status.message());
  switch (status.code()) {
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
      throw py::error_already_set();
    case StatusCode::kInvalidArgument:
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported:
      throw py::value_error(message);
    case StatusCode::kIOError: {
      PyErr_SetString(PyExc_OSError, message.c_str());
      throw py::error_already_set();
    }
    default:
      throw std::runtime_error(message);
  }
}

void BindCommon(py::module_& m) {
  static py::exception<std::runtime_error> config_error(m, "ConfigError", PyExc_ValueError);
  g_config_error = config_error.ptr();
}

void BindAnalysis(py::module_& m) {
  m.def("index_columns", &IndexColumns, py::arg("path"), py::arg("ranks") = std::nullopt,
        py::arg("iterations") = std::nullopt, py::arg("kernel_names") = std::nullopt,
        py::arg("kernel_regex") = std::nullopt, py::arg("io") = std::nullopt,
        "One row per dumped tensor of a dump directory (filtered), as compact columns.");
  m.def("read_tensor", &ReadTensor, py::arg("path"), py::arg("ascend_dump_file") = false,
        py::arg("is_input") = false, py::arg("slot") = 0,
        "(descr, shape, fortran_order, bytes) of a .npy file or of a tensor in an Ascend dump "
        "file.");
  m.def("compare", &Compare, py::arg("a"), py::arg("b"), py::arg("iteration") = std::nullopt,
        py::arg("atol") = std::nullopt, py::arg("rtol") = std::nullopt,
        "(result CSV, result JSON) of comparing dump A (under test) with B (reference).");
  m.def("watch", &Watch, py::arg("path"), py::arg("checks") = "nan,inf",
        py::arg("count_intended_inf") = false, "The watch result as JSON.");
  m.def(
      "statistic_catalogue",
      [] {
        py::list rows;
        for (const StatisticInfo& info : StatisticCatalogue()) {
          rows.append(py::make_tuple(info.name, info.title, info.comparable));
        }
        return rows;
      },
      "(configuration name, statistic.csv column title, comparable) of every statistic "
      "category, in statistic.csv's column order.");
  m.def(
      "watch_checks",
      [] {
        py::list rows;
        for (const analysis::WatchCheckInfo& info : analysis::WatchCheckTable()) {
          rows.append(py::make_tuple(info.name, info.has_threshold, info.default_threshold));
        }
        return rows;
      },
      "(name, takes a threshold, default threshold) of every watch check.");
  m.def("watch_checks_allowed", &analysis::WatchChecksAllowed,
        "The watch checks as --check accepts them: 'nan, inf, ..., large[:T], ...'.");
}

}  // namespace graphdump::python
