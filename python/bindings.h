// The pieces of the _graphdump extension (module.cc), one function per binding file.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/status.h"

namespace graphdump::python {

// graphdump.ConfigError (a ValueError) and the Status -> exception mapping.
void BindCommon(pybind11::module_& m);
// Dump directories: read, compare, watch (analysis_bindings.cc; no LibTorch).
void BindAnalysis(pybind11::module_& m);
// load's table of a dump (load_columns.cc; no LibTorch).
void BindLoad(pybind11::module_& m);
// Configuration, the dump host, the executor (torch_bindings.cc).
void BindTorch(pybind11::module_& m);

// The calling thread's Python frames, innermost first, for an eager kernel's source trace
// (source_trace.cc). Takes the GIL.
std::vector<SourceLocation> PythonSourceTrace();
// Asks Python once for what source traces need (the standard library's directories: about a
// millisecond), so that the first step that captures does not. REQUIRES: the GIL.
void PrepareSourceTraces();

// Raises the Python exception that fits `status` (ConfigError for a configuration error,
// FileNotFoundError, OSError, ValueError, RuntimeError) with its message.
[[noreturn]] void Raise(const Status& status);
[[noreturn]] void RaiseConfigError(const std::string& message);

}  // namespace graphdump::python
