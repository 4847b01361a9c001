// _graphdump's analysis half (no LibTorch): the dump index as columns for a pandas DataFrame,
// tensors read out of dump files, and compare and watch as the CLI computes them.
//
// A dump's names can hold any bytes. Names, fields, messages and results reach Python with the
// bytes that are not UTF-8 replaced by U+FFFD, as the CLI's --json replaces them; file paths
// are decoded as Python decodes file names (os.fsdecode), so that they open again. Paths come
// in as bytes (os.fsencode).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/internal/json_text.h"

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

DumpIndex Index(const std::string& path) {
  StatusOr<DumpIndex> index = Status::Internal("not indexed");
  {
    py::gil_scoped_release no_gil;
    index = analysis::IndexDump(path);
  }
  if (!index.ok()) Raise(index.status());
  for (const std::string& warning : index->warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ValidUtf8(warning).c_str(), 1) != 0) {
      throw py::error_already_set();
    }
  }
  return std::move(*index);
}

// Whether a tensor's statistic.csv row proves it finite: NaN and both Inf counts present and 0.
bool ProvenFinite(const TensorEntry& t) {
  if (!t.stats) return false;
  for (const char* column : {"NaN Count", "Positive Inf Count", "Negative Inf Count"}) {
    auto it = t.stats->values.find(column);
    if (it == t.stats->values.end() || it->second != "0") return false;
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

// One row per dumped tensor, as columns (lists of equal length).
py::dict IndexColumns(const std::string& path) {
  const DumpIndex index = Index(path);
  std::vector<uint32_t> rank, graph, slot, call;
  std::vector<py::object> timestamp;
  std::vector<int64_t> iteration, order;
  std::vector<std::string> kernel, op_type, io, dtype, source, net;
  std::vector<py::object> file;
  std::vector<py::tuple> shape;
  std::vector<bool> is_parameter;
  std::vector<std::map<std::string, std::string>> stats;
  std::vector<const TensorEntry*> tensors;  // parallel to the rows
  for (const auto& r : index.ranks) {
    for (const auto& g : r.graphs) {
      for (const auto& it : g.iterations) {
        for (const auto& k : it.kernels) {
          const std::string line = ValidUtf8(index.SourceLine(g, k.full_name));
          const std::string full_name = ValidUtf8(k.full_name), type = ValidUtf8(k.op_type);
          const std::string net_name = ValidUtf8(g.net_name);
          for (const auto& t : k.tensors) {
            rank.push_back(r.rank);
            graph.push_back(g.graph_id);
            net.push_back(net_name);
            iteration.push_back(it.iteration);
            call.push_back(k.call);
            timestamp.push_back(t.timestamp ? py::object(py::int_(t.timestamp))
                                            : py::object(py::none()));
            order.push_back(k.order);
            kernel.push_back(full_name);
            op_type.push_back(type);
            is_parameter.push_back(k.is_parameter);
            io.push_back(t.is_input ? "input" : "output");
            slot.push_back(t.slot);
            dtype.push_back(ValidUtf8(t.dtype_name));
            std::vector<int64_t> dims = t.stats ? t.stats->shape : std::vector<int64_t>{};
            if (!t.stats && !t.path.empty() && !t.in_dump_file) {
              if (auto npy = analysis::MappedNpy::Open(t.path); npy.ok()) {
                dims = (*npy)->info().shape;
              }
            }
            py::tuple dims_tuple(dims.size());
            for (size_t i = 0; i < dims.size(); ++i) dims_tuple[i] = dims[i];
            shape.push_back(dims_tuple);
            file.push_back(PathText(t.path));
            source.push_back(line);
            std::map<std::string, std::string> values;
            if (t.stats) {
              for (const auto& [name, value] : t.stats->values) {
                values[ValidUtf8(name)] = ValidUtf8(value);
              }
            }
            stats.push_back(std::move(values));
            tensors.push_back(&t);
          }
        }
      }
    }
  }
  // The first bad element of every tensor file its statistics do not prove finite, read on every
  // core (as watch reads them).
  std::vector<std::vector<int64_t>> bad(tensors.size());
  {
    py::gil_scoped_release no_gil;
    analysis::ParallelFor(tensors.size(), analysis::DefaultThreads(), "", [&](size_t i) {
      const TensorEntry& t = *tensors[i];
      if (!t.path.empty() && !ProvenFinite(t)) bad[i] = FirstBadIndex(t);
    });
  }
  std::vector<py::object> first_index, row;
  for (const std::vector<int64_t>& at : bad) {
    if (at.empty()) {
      first_index.push_back(py::none());
      row.push_back(py::none());
      continue;
    }
    py::tuple index_tuple(at.size());
    for (size_t i = 0; i < at.size(); ++i) index_tuple[i] = at[i];
    first_index.push_back(index_tuple);
    row.push_back(at.size() >= 2 ? py::object(py::int_(at[0])) : py::object(py::none()));
  }
  py::dict columns;
  columns["rank"] = rank;
  columns["graph"] = graph;
  columns["net_name"] = net;
  columns["iteration"] = iteration;
  columns["call"] = call;
  columns["timestamp"] = timestamp;
  columns["order"] = order;
  columns["kernel"] = kernel;
  columns["op_type"] = op_type;
  columns["is_parameter"] = is_parameter;
  columns["io"] = io;
  columns["slot"] = slot;
  columns["dtype"] = dtype;
  columns["shape"] = shape;
  columns["file"] = file;
  columns["source"] = source;
  columns["first_index"] = first_index;
  columns["row"] = row;
  columns["statistics"] = stats;
  py::list skipped;
  for (const auto& s : index.skipped) {
    skipped.append(py::make_tuple(PathText(s.path), ValidUtf8(s.reason)));
  }
  columns["skipped"] = skipped;
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
  const DumpIndex index_a = Index(a);
  const DumpIndex index_b = Index(b);
  analysis::CompareOptions options;
  options.iteration = iteration;
  options.user_tolerances = atol.has_value() || rtol.has_value();
  if (atol) options.atol = *atol;
  if (rtol) options.rtol = *rtol;
  options.progress = false;
  std::string csv, json;
  {
    py::gil_scoped_release no_gil;
    const analysis::CompareResult result = analysis::CompareDumps(index_a, index_b, options);
    csv = ValidUtf8(analysis::CompareResultCsv(result));
    json = analysis::CompareResultJson(result);
  }
  return py::make_tuple(csv, json);
}

std::string Watch(const std::string& path, const std::string& checks_text,
                  bool count_intended_inf) {
  StatusOr<std::vector<analysis::WatchCheck>> checks = analysis::ParseWatchChecks(checks_text);
  if (!checks.ok()) Raise(checks.status());
  const DumpIndex index = Index(path);
  analysis::WatchOptions options;
  options.progress = false;
  options.count_intended_inf = count_intended_inf;
  py::gil_scoped_release no_gil;
  return analysis::WatchResultJson(analysis::RunWatch(index, *checks, options));
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
  m.def("index_columns", &IndexColumns, py::arg("path"),
        "One row per dumped tensor of a dump directory, as columns.");
  m.def("read_tensor", &ReadTensor, py::arg("path"), py::arg("ascend_dump_file") = false,
        py::arg("is_input") = false, py::arg("slot") = 0,
        "(descr, shape, fortran_order, bytes) of a .npy file or of a tensor in an Ascend dump "
        "file.");
  m.def("compare", &Compare, py::arg("a"), py::arg("b"), py::arg("iteration") = std::nullopt,
        py::arg("atol") = std::nullopt, py::arg("rtol") = std::nullopt,
        "(result CSV, result JSON) of comparing dump A (under test) with B (reference).");
  m.def("watch", &Watch, py::arg("path"), py::arg("checks") = "nan,inf",
        py::arg("count_intended_inf") = false, "The watch result as JSON.");
}

}  // namespace graphdump::python
