// _graphdump: the extension module of the Python package graphdump (docs/python.md). The
// package's Python code is glue: what runs, dumps and analyses is the C++ of src/.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_graphdump, m) {
  m.doc() = "graphdump's C++ libraries: the executor and dump session, and the analysis tools";
  m.attr("__version__") = GRAPHDUMP_VERSION;
  graphdump::python::BindCommon(m);
  graphdump::python::BindAnalysis(m);
  graphdump::python::BindLoad(m);
  graphdump::python::BindTorch(m);
}
