// Source traces of eager kernels (docs/python.md, "Source lines"): the Python frames that called
// an operator, read once per place in the code.
#include <Python.h>
#include <frameobject.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings.h"
#include "graphdump/graph.h"
#include "graphdump/internal/source_lines.h"

namespace graphdump::python {
namespace {

namespace py = pybind11;

// Is `file` this package's own glue, graphdump/torch.py and its _torch_*.py parts (its frames
// are never the user's line)?
bool IsPackageFile(const std::string& file) {
  return file.find("/graphdump/torch.py") != std::string::npos ||
         file.find("/graphdump/_torch_") != std::string::npos ||
         file.find("/torch/nn/modules/module.py") != std::string::npos;
}

// The standard library's directories, each ending in "/". REQUIRES: the GIL.
const std::vector<std::string>& StdlibRoots() {
  static const std::vector<std::string> roots = [] {
    std::vector<std::string> found;
    try {
      py::dict paths = py::module_::import("sysconfig").attr("get_paths")();
      for (const char* key : {"stdlib", "platstdlib"}) {
        if (paths.contains(key)) found.push_back(paths[key].cast<std::string>() + "/");
      }
    } catch (const py::error_already_set&) {
    }
    return found;
  }();
  return roots;
}

// Is `file` library code rather than the user's own: an installed package (site-packages,
// dist-packages: transformers, accelerate, torch) or Python's standard library? (hunt's
// caller line, python/graphdump/hunt_answer.py library_file, reads traces the same way.)
// REQUIRES: the GIL.
bool IsInstalledFile(const std::string& file) {
  if (file.find("/site-packages/") != std::string::npos ||
      file.find("/dist-packages/") != std::string::npos) {
    return true;
  }
  for (const std::string& root : StdlibRoots()) {
    if (file.rfind(root, 0) == 0) return true;
  }
  return false;
}

// The text of `file`'s line `line` without its indentation and line end, or "" when it cannot
// be read: read here from a plain UTF-8 file, else by Python's linecache (a file in a zip
// archive, a notebook's cell, another encoding). REQUIRES: the GIL.
std::string SourceLine(const std::string& file, int line) {
  static auto* files = new SourceLines();  // never destroyed, as the sites below
  std::optional<std::string> read =
      file.starts_with("<") ? std::nullopt : files->Line(file, line);
  std::string code;
  if (read) {
    code = std::move(*read);
  } else {
    try {
      code = py::module_::import("linecache").attr("getline")(file, line).cast<std::string>();
    } catch (const py::error_already_set&) {
      code.clear();
    }
  }
  while (!code.empty() && (code.back() == '\n' || code.back() == '\r')) code.pop_back();
  code.erase(0, code.find_first_not_of(" \t"));
  return code;
}

// What a source trace takes of one place in the program's code.
struct FrameSite {
  SourceLocation location;  // file, line and the line's text
  bool skipped = false;     // graphdump's glue or nn.Module's call machinery: left out
  bool start_up = false;    // the interpreter's own start-up frames: the trace ends
  bool own = false;         // the user's own code (not PyTorch's, a library's or the stdlib's)
};

// The site of the instruction `frame` runs, worked out once per code object and instruction:
// the kernels a step finds (hundreds at the first step that captures) run from the same few
// lines, each seen through tens of frames. REQUIRES: the GIL.
const FrameSite& SiteOf(PyFrameObject* frame) {
  // A new reference, kept by the map below for the site's key: no other code object can take
  // the address of one the map holds.
  py::object code = py::reinterpret_steal<py::object>(
      reinterpret_cast<PyObject*>(PyFrame_GetCode(frame)));
#if PY_VERSION_HEX >= 0x030B0000
  const int at = PyFrame_GetLasti(frame);
#else
  const int at = PyFrame_GetLineNumber(frame);
#endif
  using Key = std::pair<PyObject*, int>;
  struct Hash {
    size_t operator()(const Key& key) const {
      return std::hash<const void*>()(key.first) * 31 + static_cast<size_t>(key.second);
    }
  };
  // Never destroyed (the interpreter may be finalized before static destructors run).
  static auto* sites = new std::unordered_map<Key, FrameSite, Hash>();
  const Key key{code.ptr(), at};
  if (auto found = sites->find(key); found != sites->end()) return found->second;
  // Worked out before it is shared: reading a line through linecache may let another thread
  // take the GIL and look the same site up.
  FrameSite site;
  SourceLocation& loc = site.location;
  loc.file = py::reinterpret_borrow<py::str>(
                 reinterpret_cast<PyCodeObject*>(code.ptr())->co_filename).cast<std::string>();
  loc.line = PyFrame_GetLineNumber(frame);
  site.skipped = IsPackageFile(loc.file);
  site.start_up = !site.skipped && loc.file.rfind("<frozen", 0) == 0;
  if (!site.skipped && !site.start_up) {
    loc.code = SourceLine(loc.file, loc.line);
    site.own = !IsTorchLibraryFile(loc.file) && !IsInstalledFile(loc.file);
  }
  auto [it, added] = sites->try_emplace(key, std::move(site));
  if (added) code.release();  // the map's reference now
  return it->second;
}

}  // namespace

void PrepareSourceTraces() { StdlibRoots(); }

// The frames up to the first one outside PyTorch's files (the kernel's line: the user's, or a
// library's such as a transformers model's), on to the first one outside every installed
// package and the standard library (the user's own line that called into the library), then
// up to three of its callers; graphdump's glue and nn.Module's call machinery are left out.
std::vector<SourceLocation> PythonSourceTrace() {
  py::gil_scoped_acquire gil;
  std::vector<SourceLocation> trace;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  int callers_left = -1;  // set once the user's own frame is found
  while (frame != nullptr && trace.size() < 32 && callers_left != 0) {
    const FrameSite& site = SiteOf(frame);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
    if (site.skipped) continue;
    if (site.start_up) break;
    trace.push_back(site.location);
    if (callers_left > 0) --callers_left;
    if (site.own && callers_left < 0) callers_left = 3;
  }
  Py_XDECREF(frame);
  return trace;
}

}  // namespace graphdump::python
