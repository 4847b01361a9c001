// _graphdump's analysis half (no LibTorch): tensors read out of dump files, and compare and
// watch as the CLI computes them (load's table: load_columns.cc).
//
// A dump's names can hold any bytes. Names, fields, messages and results reach Python with the
// bytes that are not UTF-8 replaced by U+FFFD, as the CLI's --json replaces them; file paths
// are decoded as Python decodes file names (os.fsdecode), so that they open again. Paths come
// in as bytes (os.fsencode).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>

#include <string>
#include <vector>

#include "bindings.h"
#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/config.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/statistic_catalogue.h"

namespace graphdump::python {
namespace {

namespace py = pybind11;

PyObject* g_config_error = nullptr;

using internal::ValidUtf8;

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
